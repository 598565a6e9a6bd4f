# category: resources
# summary: 1 GiB in a memfd grown with fallocate, memory no mapping and no quota counts (under --memory 256M --disk 64M)
# args: --memory 256M --disk 64M
# expect: outcome=error
# expect-error-contains: blocked: errno 1
# targets: host:resources
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_memfd_fill", "", 1024L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
