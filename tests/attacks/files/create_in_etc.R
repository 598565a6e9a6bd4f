# category: files
# summary: create a file under /etc
# expect: outcome=error
# expect-error-contains: cannot open
# targets: file:new-etc
# calibrate: yes
# calibrate-expect-changed: file:new-etc

writeLines("dropped", "{{NEW_ETC}}")
