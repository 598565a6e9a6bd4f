# category: resources
# summary: sleep in C with every signal blocked
# args: --timeout 2
# expect: outcome=timeout
# targets: host:resources
# calibrate: no — unsandboxed it sleeps for a minute; there is no limit to prove

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
.C("probe_sleep", "", 60L, res = -1L)
