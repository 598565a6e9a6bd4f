# category: allowlist
# summary: assign into the global environment, under a function allowlist (the sets arithmetic, data-frames, plotting)
# functions: arithmetic, data-frames, plotting
# expect: outcome=refused
# expect-error-contains: `assign` (line 9, column
# targets: none
# calibrate: no — the allowlist is rsandbox's own layer; R without it has nothing to escape

assign('x', 1, envir = globalenv())
