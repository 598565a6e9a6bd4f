# category: network
# summary: connect(2) to a unix socket on the host's file system (an evalbox hole)
# expect: outcome=error
# expect-error-contains: blocked
# targets: listener:unix
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED
# calibrate-expect-received: unix

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_unix_connect", "{{UNIX_PATH}}", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
