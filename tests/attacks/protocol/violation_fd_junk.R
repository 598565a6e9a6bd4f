# category: protocol
# summary: send junk on fd 4 (the channel that carried the seccomp listener)
# expect: outcome=ok
# expect-stdout-contains: fd 4 probe returned
# targets: none
# calibrate: no — fd 3 is the sandbox's channel to the supervisor; it exists only inside the sandbox

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_violation_fd_junk", "", 0L, res = -1L)$res
cat("fd 4 probe returned", res, "\n")
