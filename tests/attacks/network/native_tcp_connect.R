# category: network
# summary: connect(2) + send(2) to the host's TCP listener from native code
# expect: outcome=error
# expect-error-contains: blocked
# targets: listener:tcp
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED
# calibrate-expect-received: tcp

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_tcp_connect", "ATTACK-SUCCEEDED\n", {{TCP_PORT}}L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
