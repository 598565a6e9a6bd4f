# category: resources
# summary: catch R's interrupt and keep sleeping
# args: --timeout 2
# expect: outcome=timeout
# targets: host:resources
# calibrate: no — unsandboxed it sleeps forever; there is no limit to prove

repeat tryCatch(Sys.sleep(60), interrupt = function(e) NULL, error = function(e) NULL)
