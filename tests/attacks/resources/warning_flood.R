# category: resources
# summary: 20000 warnings (returned in the result) under --max-output 1M
# args: --max-output 1M --timeout 20
# expect: outcome=output_limit
# targets: host:resources
# calibrate: no — unsandboxed this just consumes the host's terminal or log, which is the harm the limit prevents

for (i in 1:2e4) warning(strrep("w", 100))
