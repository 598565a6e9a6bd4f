# category: network
# summary: an allowed name that resolves to an IPv4-mapped IPv6 address of loopback (::ffff:127.0.0.1), as DNS rebinding would make it
# network: cran.test, mapped.test
# expect: outcome=error
# expect-error-contains: mapped.test resolves to ::ffff:127.0.0.1
# targets: host:cran
# calibrate: no — the name resolves only in the proxy (the profile's hosts); the egress crate's tests (crates/egress/tests/proxy.rs, every_resolved_address_is_checked_whatever_the_name) reach each address without the check

Sys.setenv(CURL_CA_BUNDLE = "{{CRAN_CA}}")
x <- readLines(url("https://mapped.test/"))
cat("ATTACK-SUCCEEDED\n")
