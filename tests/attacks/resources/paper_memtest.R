# category: resources
# summary: the paper's memtest (B.3): 76 MB under --memory 100M
# args: --memory 100M
# expect: outcome=memory_limit
# expect-error-contains: cannot allocate
# targets: host:resources
# calibrate: yes
# calibrate-expect-stdout-contains: allocated 1

# The paper's unit test B.3: a 76 MB matrix under a 100 MB limit.
A <- matrix(rnorm(1e7), 1e4)
cat("allocated", length(A), "\n")
