# category: resources
# summary: open connections until R runs out
# expect: outcome=error
# expect-error-contains: all connections are in use
# targets: host:resources
# calibrate: no — R's own connection table is the limit here, the same in and out of the sandbox

cons <- lapply(1:1000, function(i) file(tempfile(), "w"))
