# category: kernel
# summary: add_key(2): store a key in the kernel
# docker-expect: outcome=error — Docker's default seccomp profile refuses add_key (EPERM) before rsandbox's filter sees it: blocked, but not reported as a violation
# expect: outcome=violation
# expect-violation: add_key
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_add_key", "", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
