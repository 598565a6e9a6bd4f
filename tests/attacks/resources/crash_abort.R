# category: resources
# summary: abort() in native code is reported as a crash
# expect: outcome=crashed
# expect-error-contains: signal 6
# targets: host:resources
# calibrate: no — a crash is a crash anywhere; the point is the structured report

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
.C("probe_abort", "", 0L, res = -1L)
