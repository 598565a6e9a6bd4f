# category: files
# summary: read ~/rsandbox-attack-secret.txt through path.expand (HOME is the workspace inside)
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:home
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

cat(readLines(path.expand("~/rsandbox-attack-secret.txt")), sep = "\n")
