# category: allowlist
# summary: pkg::fun of a function not allowed (`::` itself is, guarded), under a function allowlist (the sets arithmetic, data-frames, plotting)
# functions: arithmetic, data-frames, plotting
# expect: outcome=refused
# expect-error-contains: `system` (line 9, column
# targets: none
# calibrate: no — the allowlist is rsandbox's own layer; R without it has nothing to escape

base::system('id')
