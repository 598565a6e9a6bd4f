# category: files
# summary: open(2)+write(2) a host file from native code
# expect: outcome=error
# expect-error-contains: blocked
# targets: file:tmp-target
# calibrate: yes
# calibrate-expect-changed: file:tmp-target

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_write_file", "{{TARGET_TMP}}", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
