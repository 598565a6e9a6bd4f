# category: legit
# summary: forks while signals arrive (a 1 ms profiling timer, children exiting): each fork must succeed, none may fail with EINTR
# expect: outcome=ok
# expect-value: 200
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

Rprof(file.path(tempdir(), "profile.out"), interval = 0.001)
made <- 0L
for (round in 1:25) {
  made <- made + length(parallel::mclapply(1:8, function(i) { x <- 0; for (k in 1:2000) x <- x + k; i }, mc.cores = 4))
}
Rprof(NULL)
made
