# category: network
# summary: makeForkCluster: forked workers talk to the master over a TCP socket
# expect: outcome=error
# expect-error-contains: cannot
# targets: none
# calibrate: yes
# calibrate-net: no
# calibrate-expect-stdout-contains: cluster up

cl <- parallel::makeForkCluster(1)
cat("cluster up\n")
parallel::stopCluster(cl)
