# category: environment
# summary: SIOCGIFCONF on the inherited channel socket lists the host's network interfaces
# expect: outcome=error
# expect-error-contains: blocked: errno 1
# targets: none
# calibrate: no — fd 3 is the sandbox's channel to the supervisor; it exists only inside the sandbox

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_socket_ioctl", "", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
