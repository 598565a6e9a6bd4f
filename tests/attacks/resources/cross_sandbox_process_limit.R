# category: resources
# summary: our own forks must not count against another tenant's processes (the victim holds 21)
# args: --nproc 20
# container-loses: without user namespaces, the sandboxes of an unprivileged user share its uid, so RLIMIT_NPROC counts all of them together (as root each sandbox still gets its own uid)
# expect: outcome=ok
# expect-stdout-contains: own process
# targets: proc:victim
# calibrate: no — the point is the isolation between two concurrent sandboxes

p <- parallel::mcparallel("own process")
print(parallel::mccollect(p)[[1]])
