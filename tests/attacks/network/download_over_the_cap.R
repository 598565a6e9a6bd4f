# category: network
# summary: an endless download from an allowed host (no Content-Length) against the profile's 8 MiB network.max_download: the proxy ends it at the cap
# network: cran.test
# args: --timeout 60
# expect: outcome=ok
# expect-stdout-contains: WITHIN-CAP
# expect-stdout-not: OVER-CAP
# targets: host:cran
# calibrate: no — the test host serves it only through the veth the proxy reaches; the egress crate's tests (a_download_is_cut_at_max_bytes_in_for_the_whole_request) show the uncapped stream

Sys.setenv(CURL_CA_BUNDLE = "{{CRAN_CA}}")
# Without a Content-Length, a connection the proxy closes at the cap looks to libcurl
# like the end of the body: what came in is what counts.
tryCatch(download.file("https://{{CRAN_HOST}}/endless", "big", quiet = TRUE), error = function(e) NULL)
size <- if (file.exists("big")) file.size("big") else 0
cat(size, if (size <= 8 * 2^20) "WITHIN-CAP" else "OVER-CAP", "\n")
