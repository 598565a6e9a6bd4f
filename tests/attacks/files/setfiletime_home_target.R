# category: files
# summary: backdate a file in the home directory (utimensat; Landlock does not cover it)
# expect: outcome=error
# expect-error-contains: blocked
# targets: file:home-target
# calibrate: yes
# calibrate-expect-changed: file:home-target

if (!Sys.setFileTime("{{TARGET_HOME}}", as.POSIXct("1999-12-31", tz = "UTC"))) stop("blocked: utime refused")
cat("timestamp changed\n")
