# category: files
# summary: read a secret with scan()
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:tmp
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

cat(scan("{{TMP_SECRET}}", what = "", quiet = TRUE), "\n")
