# category: files
# summary: disguise ourselves as a kernel thread through /proc/self/comm
# expect: outcome=error
# expect-error-contains: cannot open
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: now disguised as: kworker

writeLines("kworker/0:1", "/proc/self/comm")
cat("now disguised as:", readLines("/proc/self/comm"), "\n")
