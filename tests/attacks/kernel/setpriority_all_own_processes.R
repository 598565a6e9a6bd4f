# category: kernel
# summary: setpriority(PRIO_USER): renice every process of our uid, on the whole host
# expect: outcome=error|ok
# expect-stdout-contains: probe setpriority(PRIO_USER
# targets: proc:sleeper, proc:victim
# calibrate: no — unsandboxed as root it would renice every root process of the test machine

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_setpriority_user", "", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
