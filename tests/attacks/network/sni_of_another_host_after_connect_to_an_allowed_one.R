# category: network
# summary: domain fronting: CONNECT to an allowed host, then a TLS ClientHello naming another (denied) host
# network: cran.test
# expect: outcome=error
# expect-error-contains: SNI other.test does not match CONNECT cran.test
# targets: host:cran
# calibrate: no — without the check the tunnel reaches the allowed host's address whatever the SNI; the egress crate's tests (the_tls_server_name_must_be_the_connect_host) show it

# A minimal TLS 1.2 ClientHello carrying only a server name.
client_hello <- function(name) {
  u16 <- function(n) as.raw(c(n %/% 256, n %% 256))
  host <- charToRaw(name)
  sni <- c(as.raw(0), u16(length(host)), host)
  sni <- c(u16(length(sni)), sni)
  extensions <- c(u16(0), u16(length(sni)), sni)
  body <- c(as.raw(c(3, 3)), as.raw(sample(0:255, 32, TRUE)), as.raw(0), u16(2), as.raw(c(0x13, 0x01)),
            as.raw(c(1, 0)), u16(length(extensions)), extensions)
  handshake <- c(as.raw(1), as.raw(0), u16(length(body)), body)
  c(as.raw(c(0x16, 3, 1)), u16(length(handshake)), handshake)
}
port <- as.integer(sub(".*:", "", Sys.getenv("https_proxy")))
con <- socketConnection("127.0.0.1", port, open = "r+b", timeout = 10)
writeBin(charToRaw("CONNECT {{CRAN_HOST}}:443 HTTP/1.1\r\nHost: {{CRAN_HOST}}:443\r\n\r\n"), con)
# The proxy's answer head, up to its blank line.
head <- raw(0)
deadline <- Sys.time() + 10
while (!grepl("\r\n\r\n", rawToChar(head)) && Sys.time() < deadline) {
  if (socketSelect(list(con), timeout = 1)) head <- c(head, readBin(con, "raw", 1))
}
answer <- rawToChar(head)
if (!grepl(" 200 ", answer)) stop("CONNECT refused: ", answer)
writeBin(client_hello("other.test"), con)
reply <- if (socketSelect(list(con), timeout = 10)) readBin(con, "raw", 5) else raw(0)
close(con)
if (length(reply) > 0 && reply[1] == as.raw(0x16)) cat("ATTACK-SUCCEEDED\n") else stop("the tunnel was closed")
