# category: files
# summary: create a file in the host's /tmp
# expect: outcome=error
# expect-error-contains: cannot open
# targets: file:new-tmp
# calibrate: yes
# calibrate-expect-changed: file:new-tmp

writeLines("dropped", "{{NEW_TMP}}")
