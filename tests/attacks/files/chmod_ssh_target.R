# category: files
# summary: make a private file in ~/.ssh world-readable with chmod
# expect: outcome=error
# expect-error-contains: blocked
# targets: file:ssh-target
# calibrate: yes
# calibrate-expect-changed: file:ssh-target

if (!Sys.chmod("{{TARGET_SSH}}", "644", use_umask = FALSE)) stop("blocked: chmod refused")
cat("chmod worked\n")
