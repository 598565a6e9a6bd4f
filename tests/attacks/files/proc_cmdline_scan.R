# category: files
# summary: read the command lines of the host's processes through /proc/<pid>/cmdline
# expect: outcome=ok
# expect-stdout-contains: readable command lines: 0
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: Rscript

me <- Sys.getpid()
seen <- 0
for (p in c(1, seq(max(2, me - 150), me + 5))) {
  x <- tryCatch(readBin(sprintf("/proc/%d/cmdline", p), "raw", 1e5), error = function(e) NULL, warning = function(w) NULL)
  if (length(x)) {
    seen <- seen + 1
    x[x == as.raw(0)] <- as.raw(32)
    cat(p, ":", rawToChar(x), "\n")
  }
}
cat("readable command lines:", seen, "\n")
