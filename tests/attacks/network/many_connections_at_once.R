# category: network
# summary: 1 000 tunnels to an allowed host opened at once (ten forked R processes, 100 each: R's own connection table stops near 125 a process) against network.max_concurrent (16)
# network: cran.test
# args: --timeout 90
# expect: outcome=ok
# expect-stdout-contains: WITHIN-CAP
# targets: host:cran
# calibrate: no — the point is the proxy's cap; the egress crate's tests (a_thousand_connections_at_once_are_refused_beyond_the_caps_with_bounded_descriptors) show it

port <- as.integer(sub(".*:", "", Sys.getenv("https_proxy")))
# The status line's start ("HTTP/1.1 200" or "HTTP/1.1 503"): a tunnel stays open, so
# there is no end of the head to wait for; a reset connection reads as nothing.
status_of <- function(con) {
  tryCatch(rawToChar(readBin(con, "raw", 12)), error = function(e) "", warning = function(w) "")
}
# One process: open 100 tunnels, wait until all ten processes have (a file each in the
# workspace), then count the answers that opened a tunnel while every one is still open.
worker <- function(k) {
  cons <- list()
  for (i in 1:100) {
    con <- tryCatch(socketConnection("127.0.0.1", port, open = "r+b", timeout = 10),
                    error = function(e) NULL, warning = function(w) NULL)
    if (is.null(con)) break
    writeLines("CONNECT {{CRAN_HOST}}:443 HTTP/1.1\r\nHost: {{CRAN_HOST}}\r\n\r", con, sep = "\n")
    cons[[length(cons) + 1]] <- con
  }
  file.create(sprintf("opened-%d", k))
  deadline <- Sys.time() + 30
  while (length(list.files(pattern = "^opened-")) < 10 && Sys.time() < deadline) Sys.sleep(0.05)
  open <- sum(vapply(cons, function(con) endsWith(status_of(con), " 200"), logical(1)))
  for (con in cons) close(con)
  c(asked = length(cons), open = open)
}
jobs <- lapply(1:10, function(k) parallel::mcparallel(worker(k)))
counts <- do.call(rbind, parallel::mccollect(jobs))
asked <- sum(counts[, "asked"]); open <- sum(counts[, "open"])
cat(asked, "asked,", open, "tunnels:", if (open >= 1 && open <= 16) "WITHIN-CAP" else "OVER-CAP", "\n")
