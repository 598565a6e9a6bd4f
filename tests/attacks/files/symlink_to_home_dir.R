# category: files
# summary: a symlink to the home directory, then list and read through it
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:home
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

file.symlink("{{HOME}}", "home")
print(list.files("home", all.files = TRUE))
cat(readLines("home/rsandbox-attack-secret.txt"), sep = "\n")
