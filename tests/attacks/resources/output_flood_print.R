# category: resources
# summary: print() a million lines under --max-output 1M
# args: --max-output 1M --timeout 20
# expect: outcome=output_limit
# targets: host:resources
# calibrate: no — unsandboxed this just consumes the host's terminal or log, which is the harm the limit prevents

for (i in 1:1e6) print(i)
