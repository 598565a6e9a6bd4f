# category: files
# summary: hard-link /tmp's secret into the workspace
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:tmp
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

print(file.link("{{TMP_SECRET}}", "hl"))
cat(readLines("hl"), sep = "\n")
