# category: network
# summary: reach 127.0.0.1 through the proxy written as 0177.0.0.1 (an IP literal is never a name of the allowlist)
# network: cran.test
# expect: outcome=error
# expect-error-contains: is not in this profile's network.allow
# targets: host:cran
# calibrate: no — an IP literal reaches its address without the proxy's checks only where a listener waits on the proxy host's loopback; the egress crate's tests (ip_literals_are_denied_in_every_form) show each form

Sys.setenv(CURL_CA_BUNDLE = "{{CRAN_CA}}")
x <- readLines(url("https://0177.0.0.1/"))
cat("ATTACK-SUCCEEDED\n")
