# category: resources
# summary: a fcntl read lock (POSIX and OFD) on a file of R's library, which would block a host program that wants to write it
# expect: outcome=ok
# expect-stdout-contains: read locks granted, on the sandbox's own inode
# targets: lock:r-library
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED
# no-private-root-expect: outcome=error — without a private root the host's inodes are the sandbox's, so record locks are refused outright (ENOLCK)

# The runner holds a write lock on {{LOCKED_R_FILE}} while this runs: a read lock that
# lands on the host's inode meets it (EAGAIN), as a host writer would meet ours.
hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_record_lock", "{{LOCKED_R_FILE}}", 0L, res = -1L)$res
if (res == 0L) {
  cat("ATTACK-SUCCEEDED\n")
} else if (res == -1L) {
  cat("read locks granted, on the sandbox's own inode\n")
} else {
  stop("blocked: errno ", res)
}
