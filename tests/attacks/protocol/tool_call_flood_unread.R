# category: protocol
# summary: up to 2 million refused tool calls, never reading a reply: the queue of answers must not grow without bound
# args: --timeout 30
# expect: outcome=crashed
# expect-error-contains: unread
# targets: host:resources
# calibrate: no — fd 3 is the sandbox's channel to the supervisor; it exists only inside the sandbox

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
# The 8 MiB cap on unread replies takes tens of thousands of calls: 2 s for a debug-built
# supervisor alone, 11 s once seen with every corpus row sharing 2 slow cores; the
# timeout stays well above that, so the case tests the cap and not the machine's speed.
res <- .C("probe_tool_call_flood", "", 8L, res = -1L)$res
