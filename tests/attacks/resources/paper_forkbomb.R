# category: resources
# summary: the paper's recursive fork bomb (B.5) under --nproc 20
# args: --nproc 20 --timeout 15
# expect: outcome=process_limit
# targets: host:resources
# calibrate: no — the paper itself warns not to run it outside a sandbox

forkbomb <- function() {
  repeat {
    parallel::mcparallel(forkbomb())
  }
}
forkbomb()
