# category: files
# summary: read /etc/shadow (root-only unsandboxed)
# expect: outcome=error
# expect-error-contains: cannot open
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: root:

cat(readLines("/etc/shadow"), sep = "\n")
