# category: files
# summary: create a file in the home directory (e.g. a new ~/.Rprofile)
# expect: outcome=error
# expect-error-contains: cannot open
# targets: file:new-home
# calibrate: yes
# calibrate-expect-changed: file:new-home

writeLines("system(\"id\")", "{{NEW_HOME}}")
