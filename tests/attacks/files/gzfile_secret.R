# category: files
# summary: read a secret through gzfile (another connection type)
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:shm
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

cat(readLines(gzfile("{{SHM_SECRET}}")), sep = "\n")
