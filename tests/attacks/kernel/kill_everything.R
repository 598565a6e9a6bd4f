# category: kernel
# summary: kill(-1, SIGKILL): every process this uid may signal (other sandboxes, the supervisor, host processes)
# expect: outcome=ok
# expect-stdout-contains: kill(-1) returned
# targets: proc:victim, proc:sleeper
# calibrate: no — kill(-1) reports success even when every target refused; the victim and sleeper checks are the measure

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_kill_all", "", 0L, res = -1L)$res
cat("kill(-1) returned", res, "\n")
