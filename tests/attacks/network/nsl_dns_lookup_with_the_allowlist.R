# category: network
# summary: a DNS lookup with nsl() (DNS is a classic exfiltration channel) — with the network allowlist on (TCP client sockets only)
# network: cran.test
# expect: outcome=ok
# expect-stdout-contains: lookup done: no answer
# targets: listener:dns
# calibrate: yes
# calibrate-timeout: 30
# calibrate-expect-received: dns

r <- utils::nsl("{{DNS_NAME}}")
cat("lookup done:", if (is.null(r)) "no answer" else r, "\n")
