# category: files
# summary: read another sandbox's workspace file through /proc/<pid>/root from native code
# expect: outcome=error
# expect-error-contains: blocked
# targets: secret:victim
# calibrate: yes
# calibrate-pidns: no
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_read_file", "{{VICTIM_ROOT_FILE}}", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
