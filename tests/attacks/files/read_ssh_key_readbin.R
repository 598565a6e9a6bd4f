# category: files
# summary: read the SSH key as raw bytes with readBin
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:ssh
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

x <- readBin("{{SSH_KEY}}", "raw", 1e5)
cat(rawToChar(x))
