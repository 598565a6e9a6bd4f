# category: resources
# summary: fork, try setsid()/setpgid() to leave the process group, and outlive the sandbox
# args: --timeout 10
# expect: outcome=ok
# expect-stdout-contains: setsid refused: TRUE
# targets: host:resources
# calibrate: no — the check is that nothing survives the sandbox

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
r <- .C("probe_setsid_orphan", "", 600L, res = -1L)$res
cat("setsid refused:", r != 0L, "\n")
