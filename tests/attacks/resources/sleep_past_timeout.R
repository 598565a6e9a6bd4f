# category: resources
# summary: sleep far past the timeout
# args: --timeout 2
# expect: outcome=timeout
# targets: host:resources
# calibrate: no — unsandboxed it would simply sleep for a minute; there is no limit to prove

Sys.sleep(60)
