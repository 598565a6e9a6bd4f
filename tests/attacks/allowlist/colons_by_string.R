# category: allowlist
# summary: the guarded :: called with strings ("::"("base", "system")), under a function allowlist (the sets arithmetic, data-frames, plotting)
# functions: arithmetic, data-frames, plotting
# expect: outcome=error
# expect-error-contains: base::system is not in the function allowlist
# targets: none
# calibrate: no — the allowlist is rsandbox's own layer; R without it has nothing to escape

"::"("base", "system")("id")
