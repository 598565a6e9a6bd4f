# category: files
# summary: read a secret with read.table
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:home
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

print(read.table("{{TOKEN_FILE_HOME}}"))
