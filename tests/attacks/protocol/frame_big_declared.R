# category: protocol
# summary: a 60 MiB frame (under the 64 MiB cap) streamed in: it counts against --max-output 1M
# args: --max-output 1M
# expect: outcome=output_limit
# targets: none
# calibrate: no — fd 3 is the sandbox's channel to the supervisor; it exists only inside the sandbox

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_frame_big_declared", "", 60L, res = -1L)$res
