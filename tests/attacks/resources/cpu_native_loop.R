# category: resources
# summary: an endless loop in C, where R cannot interrupt, under --cpu 1
# args: --cpu 1 --timeout 10
# expect: outcome=cpu_limit
# targets: host:resources
# calibrate: no — unsandboxed this just consumes the host's CPU forever, which is the harm the limit prevents

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
.C("probe_cpu_burn", "", 0L, res = -1L)
