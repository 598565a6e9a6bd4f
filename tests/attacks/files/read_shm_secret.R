# category: files
# summary: read a world-readable secret in /dev/shm (an evalbox hole)
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:shm
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

cat(readLines("{{SHM_SECRET}}"), sep = "\n")
