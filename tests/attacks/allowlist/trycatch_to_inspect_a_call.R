# category: allowlist
# summary: tryCatch to inspect a call, under a function allowlist (the sets arithmetic, data-frames, plotting)
# functions: arithmetic, data-frames, plotting
# expect: outcome=refused
# expect-error-contains: `tryCatch` (line 9, column
# targets: none
# calibrate: no — the allowlist is rsandbox's own layer; R without it has nothing to escape

tryCatch(stop('x'), error = function(e) conditionCall(e))
