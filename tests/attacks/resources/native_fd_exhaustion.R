# category: resources
# summary: open(2) until the descriptor limit (--nofile 64)
# args: --nofile 64
# expect: outcome=ok
# expect-stdout-contains: fd limit held
# targets: host:resources
# calibrate: no — unsandboxed this just consumes the host's file descriptors, which is the harm the limit prevents

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
n <- .C("probe_fd_exhaustion", "", 0L, res = -1L)$res
if (n > 64) stop("more descriptors than the limit: ", n)
cat("fd limit held at", n, "\n")
