# category: files
# summary: chmod a file in the home directory to 0777 (Landlock does not cover chmod)
# expect: outcome=error
# expect-error-contains: blocked
# targets: file:home-target
# calibrate: yes
# calibrate-expect-changed: file:home-target

if (!Sys.chmod("{{TARGET_HOME}}", "777", use_umask = FALSE)) stop("blocked: chmod refused")
cat("chmod worked\n")
