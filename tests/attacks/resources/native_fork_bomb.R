# category: resources
# summary: fork(2) in a loop from C under --nproc 20
# args: --nproc 20 --timeout 15
# expect: outcome=ok
# expect-stdout-contains: before fork failed
# targets: host:resources
# calibrate: no — a fork bomb outside the sandbox would take the host down

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
n <- .C("probe_fork_bomb", "", 0L, res = -1L)$res
cat("forked", n, "\n")
if (n >= 20) stop("the process limit did not hold: ", n, " processes")
