# category: files
# summary: reach /tmp's secret through a path full of . and .. components
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:tmp
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

cat(readLines("/tmp/./../tmp//./rsandbox-attack-secret"), sep = "\n")
