# category: network
# summary: an allowed name that resolves to the cloud metadata address (169.254.169.254), as DNS rebinding would make it
# network: cran.test, metadata.test
# expect: outcome=error
# expect-error-contains: metadata.test resolves to 169.254.169.254
# targets: host:cran
# calibrate: no — the name resolves only in the proxy (the profile's hosts); the egress crate's tests (crates/egress/tests/proxy.rs, every_resolved_address_is_checked_whatever_the_name) reach each address without the check

Sys.setenv(CURL_CA_BUNDLE = "{{CRAN_CA}}")
x <- readLines(url("https://metadata.test/"))
cat("ATTACK-SUCCEEDED\n")
