# category: protocol
# summary: plant symlinks to host secrets, a symlink to /etc, a FIFO and hard links in the workspace, hoping --output copies them out
# args: --output {{OUTPUT_DIR}}
# expect: outcome=ok
# expect-stdout-contains: planted
# targets: secret:etc, secret:home, secret:tmp
# calibrate: no — --output is rsandbox's own feature; nothing to run unsandboxed

# If the host side followed any of these, the secret would land in the output dir,
# which the runner scans; it also fails on any symlink or special file written there.
invisible(file.symlink("{{ETC_SECRET}}", "etc_secret"))
invisible(file.symlink("{{TOKEN_FILE_HOME}}", "home_secret"))
invisible(file.symlink("{{TMP_SECRET}}", "tmp_secret"))
invisible(file.symlink("/etc", "etc"))
dir.create("deep/er", recursive = TRUE)
invisible(file.symlink("/proc/self/environ", "deep/er/environ"))
# Landlock does not grant making FIFOs; if it ever did, --output must still skip it.
f <- tryCatch(fifo("pipe", "w+"), error = function(e) NULL); if (!is.null(f)) close(f)
writeLines("ordinary", "real.txt")
invisible(file.link("real.txt", "hard.txt"))
cat("planted\n")
