# category: resources
# summary: allocate an 8 GB vector under --memory 256M
# args: --memory 256M
# expect: outcome=memory_limit
# expect-error-contains: cannot allocate
# targets: host:resources
# calibrate: no — unsandboxed this just consumes the host's memory (8 GB), which is the harm the limit prevents

x <- numeric(1e9)
