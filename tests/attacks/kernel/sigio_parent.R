# category: kernel
# summary: F_SETOWN + O_ASYNC: SIGIO to the zygote
# expect: outcome=ok|error
# expect-stdout-contains: probe sigio
# targets: proc:parent
# calibrate: no — the calibration's parent is the namespace's init, which ignores SIGIO; sigio_host_process calibrates the call

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_sigio_pid", "", 0L, res = -1L)$res
cat("sigio armed\n")
