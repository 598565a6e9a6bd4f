# category: files
# summary: climb out of the workspace with ../.. (the workspace is /tmp/rsandbox-*/ws-N)
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:tmp
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

cat(readLines("../../rsandbox-attack-secret"), sep = "\n")
