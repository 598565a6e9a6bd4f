# category: files
# summary: read /proc/self/status (uids, capabilities, seccomp state)
# expect: outcome=error
# expect-error-contains: cannot open
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: Name:

cat(readLines("/proc/self/status"), sep = "\n")
