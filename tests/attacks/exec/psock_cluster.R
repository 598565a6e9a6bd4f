# category: exec
# summary: parallel::makeCluster starts Rscript workers over sockets
# expect: outcome=error|violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-net: no
# calibrate-timeout: 60
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

cl <- parallel::makeCluster(1)
cat("cluster up:", unlist(parallel::clusterEvalQ(cl, "ATTACK-SUCCEEDED")), "\n")
parallel::stopCluster(cl)
