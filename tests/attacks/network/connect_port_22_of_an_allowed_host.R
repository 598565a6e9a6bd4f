# category: network
# summary: CONNECT to port 22 (ssh) of an allowed host, whose rule gives port 443 only
# network: cran.test
# expect: outcome=error
# expect-error-contains: cran.test:22 is not in this profile's network.allow
# targets: host:cran
# calibrate: no — nothing listens on the test host's port 22; the egress crate's tests (names_outside_the_allowlist_get_403_with_the_reason) show the port check

# The proxy's answer head, read byte by byte until its blank line or the end.
head_of <- function(con) {
  head <- raw(0)
  deadline <- Sys.time() + 10
  while (!grepl("\r\n\r\n", rawToChar(head)) && Sys.time() < deadline) {
    if (!socketSelect(list(con), timeout = 1)) next
    byte <- readBin(con, "raw", 1)
    if (length(byte) == 0) break
    head <- c(head, byte)
  }
  rawToChar(head)
}
con <- socketConnection("127.0.0.1", as.integer(sub(".*:", "", Sys.getenv("https_proxy"))), open = "r+b", timeout = 10)
writeLines("CONNECT {{CRAN_HOST}}:22 HTTP/1.1\r\nHost: {{CRAN_HOST}}:22\r\n\r", con, sep = "\n")
answer <- head_of(con)
close(con)
if (grepl(" 200 ", answer)) cat("ATTACK-SUCCEEDED\n") else stop("refused: ", answer)
