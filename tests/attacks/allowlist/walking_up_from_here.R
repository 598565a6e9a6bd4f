# category: allowlist
# summary: walking up from here, under a function allowlist (the sets arithmetic, data-frames, plotting)
# functions: arithmetic, data-frames, plotting
# expect: outcome=refused
# expect-error-contains: `parent.env` (line 9, column
# targets: none
# calibrate: no — the allowlist is rsandbox's own layer; R without it has nothing to escape

parent.env(environment())
