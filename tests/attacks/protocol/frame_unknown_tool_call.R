# category: protocol
# summary: a tool call when no tool is defined: refused by the supervisor, evaluation goes on
# expect: outcome=ok
# expect-stdout-contains: still running after the tool call
# targets: none
# calibrate: no — fd 3 is the sandbox's channel to the supervisor; it exists only inside the sandbox

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_frame_tool_call", "", 0L, res = -1L)$res
cat("still running after the tool call\n")
