# category: resources
# summary: four mcparallel workers spin under --cpu 1, in plain R
# args: --cpu 1 --timeout 30
# expect: outcome=cpu_limit
# targets: host:resources
# calibrate: no — spinning workers on the host prove nothing the sandboxed run does not

jobs <- lapply(1:4, function(i) parallel::mcparallel({ x <- 0; repeat x <- x + 1 }))
parallel::mccollect(jobs)
cat("the workers ended by themselves\n")
