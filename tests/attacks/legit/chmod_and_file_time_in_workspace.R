# category: legit
# summary: Sys.chmod() and Sys.setFileTime() on a workspace file work and show in file.info(); on R's own files they still fail
# expect: outcome=ok
# expect-value: [true, true, "600", "2001-02-03", false, false]
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate
# no-private-root-expect: outcome=ok — without a private root by-path chmod and utimes are refused (the host's files are there): both return FALSE

writeLines("x", "f")
changed <- c(Sys.chmod("f", "600", use_umask = FALSE), Sys.setFileTime("f", as.POSIXct("2001-02-03", tz = "UTC")))
info <- file.info("f")
r_file <- file.path(R.home("library"), "base", "DESCRIPTION")
list(changed[1], changed[2], format(info$mode), format(info$mtime, "%Y-%m-%d", tz = "UTC"),
     Sys.chmod(r_file, "777"), Sys.setFileTime(r_file, Sys.time()))
