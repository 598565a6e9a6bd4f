# category: files
# summary: a symlink in the workspace pointing at a secret
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:etc
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

file.symlink("{{ETC_SECRET}}", "link")
cat(readLines("link"), sep = "\n")
