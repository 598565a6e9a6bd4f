# category: kernel
# summary: syslog(2): read the kernel log
# docker-expect: outcome=error — Docker's default seccomp profile refuses syslog (EPERM) before rsandbox's filter sees it: blocked, but not reported as a violation
# expect: outcome=violation
# expect-violation: syslog
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_syslog", "", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
