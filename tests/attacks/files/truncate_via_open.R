# category: files
# summary: truncate a host file by opening it for writing
# expect: outcome=error
# expect-error-contains: cannot open
# targets: file:home-target
# calibrate: yes
# calibrate-expect-changed: file:home-target

con <- file("{{TARGET_HOME}}", "w")
close(con)
