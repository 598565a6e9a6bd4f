# category: allowlist
# summary: model.frame (reachable for the modelling functions) made to evaluate system() from a formula built from a string, under a function allowlist (the sets arithmetic, data-frames, plotting, models)
# functions: arithmetic, data-frames, plotting, models
# expect: outcome=error
# expect-error-contains: could not find function "system"
# targets: none
# calibrate: no — the allowlist is rsandbox's own layer; R without it has nothing to escape

mf <- "::"("stats", "model.frame")
mf(formula(paste("y ~", "system('id')")), data = data.frame(y = 1))
