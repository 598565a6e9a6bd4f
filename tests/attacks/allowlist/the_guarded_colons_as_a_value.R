# category: allowlist
# summary: the guarded :: taken as a value and called with a computed package name, under a function allowlist (the sets arithmetic, data-frames, plotting, models)
# functions: arithmetic, data-frames, plotting, models
# expect: outcome=error
# expect-error-contains: is not in the function allowlist
# targets: none
# calibrate: no — the allowlist is rsandbox's own layer; R without it has nothing to escape

colons <- `::`
pieces <- c("ba", "se")
colons(paste0(pieces[1], pieces[2]), "system")("id")
