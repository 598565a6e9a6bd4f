# category: exec
# summary: system(intern = TRUE) to cat a secret the R side cannot open
# expect: outcome=violation
# expect-violation: execve
# targets: secret:etc
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET
# compile-expect: outcome=ok — cat is listed and runs, inside Landlock: the secret stays unreadable (a warning with cat's status)

x <- system("cat {{ETC_SECRET}}", intern = TRUE)
cat(x, sep = "\n")
