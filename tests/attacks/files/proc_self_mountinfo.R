# category: files
# summary: read the host's mount table
# expect: outcome=error
# expect-error-contains: cannot open
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains:  / 

cat(readLines("/proc/self/mountinfo"), sep = "\n")
