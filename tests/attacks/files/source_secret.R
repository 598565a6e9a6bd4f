# category: files
# summary: source() a secret file: the echo or the parser's error message quotes what it read
# expect: outcome=ok
# expect-stdout-contains: source failed: cannot open
# targets: secret:etc
# calibrate: yes
# calibrate-expect-stdout-contains: SECRET

# Whether the secret parses or not, echo or the parse error shows the line.
tryCatch(source("{{ETC_SECRET}}", echo = TRUE),
         error = function(e) cat("source failed:", conditionMessage(e), "\n"))
