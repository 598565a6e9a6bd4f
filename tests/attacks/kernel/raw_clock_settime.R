# category: kernel
# summary: clock_settime(2) with null arguments: the call itself must be refused and named
# docker-expect: outcome=error — Docker's default seccomp profile refuses clock_settime (EPERM) before rsandbox's filter sees it: blocked, but not reported as a violation
# expect: outcome=violation
# expect-violation: clock_settime
# targets: none
# calibrate: no — with null arguments the call does nothing useful unsandboxed (or would change the host); what counts is that seccomp names it

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_raw_syscall", "clock_settime", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
