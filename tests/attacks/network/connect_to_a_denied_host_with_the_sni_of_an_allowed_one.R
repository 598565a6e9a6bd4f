# category: network
# summary: domain fronting the other way: CONNECT to a denied host, the ClientHello naming an allowed one
# network: cran.test
# expect: outcome=error
# expect-error-contains: other.test:443 is not in this profile's network.allow
# targets: host:cran
# calibrate: no — other.test exists only for the proxy; the egress crate's tests (the_tls_server_name_must_be_the_connect_host) show the SNI check both ways

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
port <- as.integer(sub(".*:", "", Sys.getenv("https_proxy")))
con <- socketConnection("127.0.0.1", port, open = "r+b", timeout = 10)
writeBin(charToRaw("CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n"), con)
answer <- head_of(con)
close(con)
if (grepl(" 200 ", answer)) cat("ATTACK-SUCCEEDED\n") else stop("CONNECT refused: ", answer)
