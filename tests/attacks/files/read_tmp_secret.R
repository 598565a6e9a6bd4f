# category: files
# summary: read a world-readable secret in the host's /tmp
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:tmp
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

cat(readLines("{{TMP_SECRET}}"), sep = "\n")
