# category: legit
# summary: parallel::mclapply with two cores
# expect: outcome=ok
# expect-value: [1, 4, 9, 16]
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

unlist(parallel::mclapply(1:4, function(i) i^2, mc.cores = 2))
