# category: resources
# summary: ten forked children each touch 100 MiB under --memory 256M: each under RLIMIT_AS, together 1 GB
# args: --memory 256M --timeout 30
# expect: outcome=memory_limit
# targets: host:resources
# calibrate: no — the host would simply hold 1 GB for 30 s

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_children_alloc", "100", 10L, res = -1L)$res
cat("the children held their memory\n")
