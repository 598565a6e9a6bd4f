# category: protocol
# summary: 100000 empty frames
# expect: outcome=crashed
# expect-error-contains: broke protocol
# targets: none
# calibrate: no — fd 3 is the sandbox's channel to the supervisor; it exists only inside the sandbox

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_frame_zero_flood", "", 0L, res = -1L)$res
