# category: network
# summary: sendto(2) a UDP datagram to the host's 127.0.0.1 (an evalbox hole) — with the network allowlist on (TCP client sockets only)
# network: cran.test
# expect: outcome=error
# expect-error-contains: blocked
# targets: listener:udp
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED
# calibrate-expect-received: udp

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_udp_sendto", "ATTACK-SUCCEEDED", {{UDP_PORT}}L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
