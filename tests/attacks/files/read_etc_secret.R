# category: files
# summary: read a world-readable secret under /etc
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:etc
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

cat(readLines("{{ETC_SECRET}}"), sep = "\n")
