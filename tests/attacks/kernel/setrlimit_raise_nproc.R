# category: kernel
# summary: raise RLIMIT_NPROC to unlimited
# expect: outcome=error
# expect-error-contains: blocked
# targets: none
# calibrate: no — root on the test machine lacks CAP_SYS_RESOURCE, so raising a hard limit fails unsandboxed too

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_setrlimit_raise", "", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
