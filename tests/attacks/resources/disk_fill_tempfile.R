# category: resources
# summary: fill a file under tempdir() past --fsize
# args: --fsize 10M
# expect: outcome=file_size_limit
# targets: host:resources
# calibrate: no — unsandboxed this just consumes the host's disk, which is the harm the limit prevents

writeBin(raw(5e7), tempfile())
