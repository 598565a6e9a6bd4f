# category: legit
# summary: record locks in the workspace behave as SQLite needs them (conflicts, F_GETLK, unlock, F_SETLKW, OFD locks)
# expect: outcome=ok
# expect-value: 0
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate
# no-private-root-expect: outcome=error — without a private root record locks are refused outright (ENOLCK), in the workspace too

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_workspace_locks", "", 0L, res = -1L)$res
if (res != 0L) stop("locking step ", res, " failed")
res
