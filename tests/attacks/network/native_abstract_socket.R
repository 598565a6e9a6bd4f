# category: network
# summary: connect(2) to an abstract unix socket (no file, no path to check)
# expect: outcome=error
# expect-error-contains: blocked
# targets: listener:abstract
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED
# calibrate-expect-received: abstract

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_abstract_connect", "{{ABSTRACT_NAME}}", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
