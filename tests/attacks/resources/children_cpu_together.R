# category: resources
# summary: eight forked children spin under --cpu 1: each stays under RLIMIT_CPU, together they are far over it
# args: --cpu 1 --timeout 30
# expect: outcome=cpu_limit
# targets: host:resources
# calibrate: no — eight spinning processes for 30 s on the host prove nothing the sandboxed run does not

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_children_burn", "", 8L, res = -1L)$res
cat("all children ended by themselves\n")
