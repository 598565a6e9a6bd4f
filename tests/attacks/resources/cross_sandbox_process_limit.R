# category: resources
# summary: our own forks must not count against another tenant's processes (the victim holds 21)
# args: --nproc 20
# expect: outcome=ok
# expect-stdout-contains: own process
# targets: proc:victim
# calibrate: no — the point is the isolation between two concurrent sandboxes

p <- parallel::mcparallel("own process")
print(parallel::mccollect(p)[[1]])
