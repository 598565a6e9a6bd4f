# category: files
# summary: a chain of symlinks ending at a secret
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:shm
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

file.symlink("{{SHM_SECRET}}", "a")
file.symlink("a", "b")
file.symlink(file.path(getwd(), "b"), "c")
cat(readLines("c"), sep = "\n")
