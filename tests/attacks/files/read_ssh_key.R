# category: files
# summary: read the private SSH key in ~/.ssh
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:ssh
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

cat(readLines("{{SSH_KEY}}"), sep = "\n")
