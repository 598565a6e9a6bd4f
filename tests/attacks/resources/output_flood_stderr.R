# category: resources
# summary: write to stderr without end under --max-output 1M
# args: --max-output 1M --timeout 20
# expect: outcome=output_limit
# targets: host:resources
# calibrate: no — unsandboxed this just consumes the host's terminal or log, which is the harm the limit prevents

repeat cat(strrep("e", 1e5), file = stderr())
