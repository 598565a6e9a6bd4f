# category: network
# summary: an allowed host that accepts and never answers, against network.idle_timeout (3 s here)
# network: cran.test
# args: --timeout 30
# expect: outcome=error
# expect-error-contains: network.idle_timeout
# targets: host:cran
# calibrate: no — the point is the proxy's timer; the egress crate's tests (a_silent_upstream_ends_at_the_idle_timeout_and_every_connection_at_the_deadline) show it

Sys.setenv(CURL_CA_BUNDLE = "{{CRAN_CA}}")
x <- readLines(url("https://{{CRAN_HOST}}/silent"))
cat("ATTACK-SUCCEEDED\n")
