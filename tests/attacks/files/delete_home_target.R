# category: files
# summary: delete a file in the home directory
# expect: outcome=error
# expect-error-contains: blocked
# targets: file:home-target
# calibrate: yes
# calibrate-expect-changed: file:home-target

if (!file.remove("{{TARGET_HOME}}")) stop("blocked: cannot remove")
