# category: resources
# summary: svd of a 2000 x 2000 matrix (C code) past a 2 s wall-clock limit
# args: --timeout 2
# expect: outcome=timeout
# targets: host:resources
# calibrate: no — unsandboxed this just consumes the host's CPU for a minute, which is the harm the limit prevents

m <- matrix(rnorm(4e6), 2000)
s <- svd(m)
