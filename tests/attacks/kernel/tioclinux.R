# category: kernel
# summary: ioctl(TIOCLINUX) on the console
# expect: outcome=violation
# expect-violation: ioctl
# targets: none
# calibrate: no — TIOCLINUX needs a Linux virtual console, which the test machine does not give the calibration

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_tioclinux", "", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
