# category: resources
# summary: a forked child keeps the parent waiting past the timeout
# args: --timeout 2
# expect: outcome=timeout
# targets: host:resources
# calibrate: no — unsandboxed it sleeps for a minute; there is no limit to prove

p <- parallel::mcparallel(Sys.sleep(60))
parallel::mccollect(p)
