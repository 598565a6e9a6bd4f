# category: resources
# summary: a last value of a million numbers (the result itself) under --max-output 1M
# args: --max-output 1M --timeout 20
# expect: outcome=output_limit
# targets: host:resources
# calibrate: no — unsandboxed the value is just printed; the limit is the point

rep(1.5, 1e6)
