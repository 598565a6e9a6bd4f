# category: files
# summary: create a file in /var/tmp
# expect: outcome=error
# expect-error-contains: cannot open
# targets: file:new-var-tmp
# calibrate: yes
# calibrate-expect-changed: file:new-var-tmp

writeLines("dropped", "{{NEW_VAR_TMP}}")
