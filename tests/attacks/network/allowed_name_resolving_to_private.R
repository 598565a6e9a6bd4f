# category: network
# summary: an allowed name that resolves to a private (RFC 1918) address (10.0.0.1), as DNS rebinding would make it
# network: cran.test, private.test
# expect: outcome=error
# expect-error-contains: private.test resolves to 10.0.0.1
# targets: host:cran
# calibrate: no — the name resolves only in the proxy (the profile's hosts); the egress crate's tests (crates/egress/tests/proxy.rs, every_resolved_address_is_checked_whatever_the_name) reach each address without the check

Sys.setenv(CURL_CA_BUNDLE = "{{CRAN_CA}}")
x <- readLines(url("https://private.test/"))
cat("ATTACK-SUCCEEDED\n")
