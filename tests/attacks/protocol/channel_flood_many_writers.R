# category: protocol
# summary: four processes stream one endless frame body into the channel at once (the supervisor must stay bounded and on time)
# args: --timeout 5
# expect: outcome=output_limit
# targets: host:resources
# calibrate: no — fd 3 is the sandbox's channel to the supervisor; it exists only inside the sandbox

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_channel_flood_writers", "", 4L, res = -1L)$res
