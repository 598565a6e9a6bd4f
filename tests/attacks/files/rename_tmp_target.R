# category: files
# summary: rename a file in the host's /tmp
# expect: outcome=error
# expect-error-contains: blocked
# targets: file:tmp-target
# calibrate: yes
# calibrate-expect-changed: file:tmp-target

if (!file.rename("{{TARGET_TMP}}", "{{TARGET_TMP}}.moved")) stop("blocked: cannot rename")
