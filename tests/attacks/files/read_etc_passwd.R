# category: files
# summary: read /etc/passwd (account names of the host)
# expect: outcome=error
# expect-error-contains: cannot open
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: root:x:0:0

cat(readLines("/etc/passwd"), sep = "\n")
