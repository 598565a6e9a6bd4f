# category: network
# summary: an allowed host answers with a redirect to a host outside the allowlist
# network: cran.test
# expect: outcome=error
# expect-error-contains: other.test:443 is not in this profile's network.allow
# targets: host:cran
# calibrate: no — other.test exists only for the proxy; the egress crate's tests (a_redirect_to_a_denied_host_is_a_new_request_and_denied) follow the redirect without the check

Sys.setenv(CURL_CA_BUNDLE = "{{CRAN_CA}}")
x <- readLines(url("https://{{CRAN_HOST}}/redirect-to/other.test"))
cat("ATTACK-SUCCEEDED\n")
