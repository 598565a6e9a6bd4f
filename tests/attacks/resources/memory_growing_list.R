# category: resources
# summary: grow a list by 8 MB at a time until something gives
# args: --memory 256M --timeout 20
# expect: outcome=memory_limit
# targets: host:resources
# calibrate: no — unsandboxed this just consumes the host's memory until the OOM killer acts, which is the harm the limit prevents

l <- list()
repeat l[[length(l) + 1]] <- numeric(1e6)
