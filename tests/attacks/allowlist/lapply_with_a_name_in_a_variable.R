# category: allowlist
# summary: lapply with a name in a variable, under a function allowlist (the sets arithmetic, data-frames, plotting)
# functions: arithmetic, data-frames, plotting
# expect: outcome=error
# targets: none
# calibrate: no — the allowlist is rsandbox's own layer; R without it has nothing to escape

x <- 'Sys.getpid'; lapply(1, x)
