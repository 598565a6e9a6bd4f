# category: resources
# summary: the paper's cputest (B.4): svd of a 1e4 x 1e3 matrix past a 3 s limit
# args: --timeout 3
# expect: outcome=timeout
# targets: host:resources
# calibrate: no — unsandboxed this just consumes the host's CPU, which is the harm the limit prevents

A <- matrix(rnorm(1e7), 1e3)
B <- svd(A)
