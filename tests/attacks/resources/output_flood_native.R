# category: resources
# summary: write(2) 64 MiB to fd 1 from C under --max-output 1M
# args: --max-output 1M --timeout 20
# expect: outcome=output_limit
# targets: host:resources
# calibrate: no — unsandboxed this just consumes the host's terminal or log, which is the harm the limit prevents

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
.C("probe_stdout_flood", "", 64L, res = -1L)
