# category: kernel
# summary: kill(2) a process of the same identity outside the sandbox
# expect: outcome=error
# expect-error-contains: blocked
# targets: proc:sleeper
# calibrate: yes
# calibrate-pidns: no
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_kill_pid", "", {{SLEEPER_PID}}L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
