# category: resources
# summary: a grandchild orphaned by its parent (reparented to the subreaper)
# args: --timeout 10
# expect: outcome=ok
# expect-stdout-contains: grandchild left behind
# targets: host:resources
# calibrate: no — the check is that nothing survives the sandbox

p <- parallel::mcparallel({ parallel::mcparallel(Sys.sleep(999)); "child done" })
print(parallel::mccollect(p))
cat("grandchild left behind\n")
