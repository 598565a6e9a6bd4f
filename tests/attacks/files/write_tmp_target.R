# category: files
# summary: overwrite a file in the host's /tmp
# expect: outcome=error
# expect-error-contains: cannot open
# targets: file:tmp-target
# calibrate: yes
# calibrate-expect-changed: file:tmp-target

writeLines("pwned", "{{TARGET_TMP}}")
