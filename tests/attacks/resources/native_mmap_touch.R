# category: resources
# summary: mmap 4 GiB from native code and touch every page
# args: --memory 512M
# expect: outcome=error|memory_limit|crashed
# targets: host:resources
# calibrate: no — unsandboxed this just consumes the host's memory (4 GiB), which is the harm the limit prevents

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_mmap_huge", "", 4L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
