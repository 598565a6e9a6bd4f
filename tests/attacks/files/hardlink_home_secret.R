# category: files
# summary: hard-link the home secret into the workspace (a hard link has no path to check)
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:home
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

print(file.link("{{TOKEN_FILE_HOME}}", "hl"))
cat(readLines("hl"), sep = "\n")
