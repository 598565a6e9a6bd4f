# category: resources
# summary: a fork bomb through mcparallel under --nproc 20
# args: --nproc 20 --timeout 15
# expect: outcome=process_limit
# targets: host:resources
# calibrate: no — a fork bomb outside the sandbox would take the host down

repeat parallel::mcparallel(Sys.sleep(60))
