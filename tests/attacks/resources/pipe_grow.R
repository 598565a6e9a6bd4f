# category: resources
# summary: fcntl(F_SETPIPE_SZ) grows a pipe to 1 MiB, past the 64 KiB per pipe the memory accounting assumes
# expect: outcome=error
# expect-error-contains: blocked: errno 1
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_pipe_grow", "", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
