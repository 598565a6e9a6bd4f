# category: files
# summary: append to a file in the identity's home directory
# expect: outcome=error
# expect-error-contains: cannot open
# targets: file:home-target
# calibrate: yes
# calibrate-expect-changed: file:home-target

cat("pwned\n", file = "{{TARGET_HOME}}", append = TRUE)
