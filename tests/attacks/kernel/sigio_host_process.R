# category: kernel
# summary: no kill(2): F_SETOWN + O_ASYNC make the kernel send SIGIO (fatal by default) to a host process
# expect: outcome=ok|error
# expect-stdout-contains: probe sigio
# targets: proc:sleeper
# calibrate: yes
# calibrate-pidns: no
# calibrate-expect-changed: proc:sleeper

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_sigio_pid", "", {{SLEEPER_PID}}L, res = -1L)$res
cat("sigio armed\n")
