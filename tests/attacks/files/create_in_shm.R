# category: files
# summary: create a file in /dev/shm (shared with every process of the host)
# expect: outcome=error
# expect-error-contains: cannot open
# targets: file:new-shm
# calibrate: yes
# calibrate-expect-changed: file:new-shm

writeLines("dropped", "{{NEW_SHM}}")
