# category: files
# summary: change directory out of the workspace, then read a relative path
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:tmp
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

setwd("/tmp")
cat(getwd(), "\n")
cat(readLines("rsandbox-attack-secret"), sep = "\n")
