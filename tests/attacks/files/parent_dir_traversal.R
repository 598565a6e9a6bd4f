# category: files
# summary: climb out of the workspace with ../.. to the root and down to /tmp (the workspace is /tmp/rsandbox-*/ws-N, or /dev/shm/rsandbox-*/ws-N with a disk quota)
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:tmp
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

# More ".." than any workspace is deep: at the root, ".." stays there.
cat(readLines("../../../../../../../../tmp/rsandbox-attack-secret"), sep = "\n")
