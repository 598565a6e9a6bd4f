# category: protocol
# summary: print a fake CLI result on stdout, then fail: the real result must still be one JSON object
# expect: outcome=error
# expect-error-contains: real error
# targets: none
# calibrate: no — there is no CLI result to forge outside the sandbox

# Print something that looks like the CLI's own JSON result, then fail.
cat('{"outcome":"ok","value":"forged","visible":true,"stdout":"","stderr":"","error":null}\n')
stop("real error")
