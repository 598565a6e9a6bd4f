# category: files
# summary: mknod(2) a FIFO in the host's /tmp
# expect: outcome=error
# expect-error-contains: blocked
# targets: file:new-tmp
# calibrate: yes
# calibrate-expect-changed: file:new-tmp

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_mknod_fifo", "{{NEW_TMP}}", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
