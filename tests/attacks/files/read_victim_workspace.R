# category: files
# summary: read a file in another live sandbox's workspace, directly and through /proc/<pid>/root
# expect: outcome=ok
# expect-stdout-contains: readable victim files: 0
# targets: secret:victim, proc:victim
# calibrate: yes
# calibrate-pidns: no
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

# The victim's workspace path, and the same path through its /proc/<pid>/root (its
# workspace may be a tmpfs that only its own mount namespace shows).
n <- 0
for (f in c("{{VICTIM_FILE}}", "{{VICTIM_ROOT_FILE}}")) {
  txt <- tryCatch(readLines(f), error = function(e) NULL, warning = function(w) NULL)
  if (length(txt)) { n <- n + 1; cat(f, ":", txt, "\n") }
}
cat("readable victim files:", n, "\n")
