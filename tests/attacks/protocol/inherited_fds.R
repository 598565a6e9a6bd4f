# category: protocol
# summary: which descriptors does the sandbox inherit? exactly 0-4 (stdin, stdout, stderr, channel, violations)
# expect: outcome=ok
# expect-stdout-contains: probe fds: 0 1 2 3 4\n
# targets: none
# calibrate: no — fd 3 is the sandbox's channel to the supervisor; it exists only inside the sandbox

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_list_fds", "", 0L, res = -1L)$res
