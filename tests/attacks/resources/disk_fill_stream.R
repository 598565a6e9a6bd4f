# category: resources
# summary: stream 1 MB chunks into one file until something gives
# args: --fsize 20M --timeout 20
# expect: outcome=file_size_limit
# targets: host:resources
# calibrate: no — unsandboxed this just consumes the host's disk until it is full, which is the harm the limit prevents

con <- file("big", "wb")
repeat writeBin(raw(1e6), con)
