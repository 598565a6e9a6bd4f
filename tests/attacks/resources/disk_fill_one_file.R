# category: resources
# summary: write a 100 MB file under --fsize 10M
# args: --fsize 10M
# expect: outcome=file_size_limit
# targets: host:resources
# calibrate: no — unsandboxed this just consumes the host's disk, which is the harm the limit prevents

writeBin(raw(1e8), "big")
