# category: files
# summary: read the environment through /proc/self/environ
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:env
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

x <- readBin("/proc/self/environ", "raw", 1e6)
x[x == as.raw(0)] <- as.raw(10)
cat(rawToChar(x))
