# category: files
# summary: read a secret through a file:// URL connection
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:etc
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

cat(readLines(url("file://{{ETC_SECRET}}")), sep = "\n")
