# category: files
# summary: rename(2) a host file into the workspace
# expect: outcome=error
# expect-error-contains: blocked
# targets: file:home-target
# calibrate: yes
# calibrate-expect-changed: file:home-target

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_rename_in", "{{TARGET_HOME}}", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
