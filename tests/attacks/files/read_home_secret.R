# category: files
# summary: read a secret file in the home directory of the identity running rsandbox
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:home
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

cat(readLines("{{TOKEN_FILE_HOME}}"), sep = "\n")
