# category: files
# summary: copy a secret into the workspace with file.copy
# expect: outcome=error
# expect-error-contains: blocked
# targets: secret:etc
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

if (!file.copy("{{ETC_SECRET}}", "copy.txt")) stop("blocked: file.copy failed")
cat(readLines("copy.txt"), sep = "\n")
