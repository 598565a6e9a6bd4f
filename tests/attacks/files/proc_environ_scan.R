# category: files
# summary: scan /proc/<pid>/environ of the processes around us for the supervisor's secrets
# expect: outcome=ok
# expect-stdout-contains: readable environ files: 0
# targets: secret:env
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

# The supervisor (which holds the secrets) started just before us: scan nearby pids.
me <- Sys.getpid()
readable <- 0
for (p in c(1, seq(max(2, me - 150), me + 5))) {
  f <- sprintf("/proc/%d/environ", p)
  x <- tryCatch(readBin(f, "raw", 1e6), error = function(e) NULL, warning = function(w) NULL)
  if (length(x)) {
    readable <- readable + 1
    x[x == as.raw(0)] <- as.raw(10)
    env <- strsplit(rawToChar(x), "\n")[[1]]
    hits <- grep("TOKEN|SECRET|KEY", env, value = TRUE)
    if (length(hits)) cat(p, ":", hits, "\n")
  }
}
cat("readable environ files:", readable, "\n")
