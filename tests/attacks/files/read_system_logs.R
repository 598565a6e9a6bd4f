# category: files
# summary: read the system logs under /var/log (the paper's unit test B.1)
# expect: outcome=ok
# expect-stdout-contains: no logs readable
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: FOUND-LOGS

# The paper's first security unit test (B.1), generalised: read whatever log is there.
logs <- list.files("/var/log", full.names = TRUE, recursive = TRUE)
read <- 0
for (f in logs) {
  ok <- tryCatch({ readLines(f, n = 5, warn = FALSE); TRUE }, error = function(e) FALSE, warning = function(w) FALSE)
  if (ok) read <- read + 1
}
if (read > 0) cat("FOUND-LOGS", read, "\n") else cat("no logs readable\n")
