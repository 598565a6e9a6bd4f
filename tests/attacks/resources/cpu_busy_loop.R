# category: resources
# summary: an endless R loop under --cpu 1
# args: --cpu 1 --timeout 10
# expect: outcome=cpu_limit
# targets: host:resources
# calibrate: no — unsandboxed this just consumes the host's CPU forever, which is the harm the limit prevents

repeat {}
