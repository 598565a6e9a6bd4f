# category: kernel
# summary: POSIX message queue (mq_open): a rendezvous with other sandboxes in the IPC namespace root's sandboxes share
# expect: outcome=error
# expect-error-contains: blocked
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_posix_mq", "", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
