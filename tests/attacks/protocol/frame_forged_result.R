# category: protocol
# summary: a forged `evaluated` report: the value is the sandbox's own to report, the layers are not
# expect: outcome=ok
# expect-value: "forged-by-the-sandbox"
# targets: none
# calibrate: no — fd 3 is the sandbox's channel to the supervisor; it exists only inside the sandbox

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_frame_forged_result", "forged-by-the-sandbox", 0L, res = -1L)$res
