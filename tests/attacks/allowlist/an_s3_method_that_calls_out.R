# category: allowlist
# summary: an S3 method that calls out, under a function allowlist (the sets arithmetic, data-frames, plotting)
# functions: arithmetic, data-frames, plotting
# expect: outcome=refused
# expect-error-contains: `Sys.getpid` (line 9, column
# targets: none
# calibrate: no — the allowlist is rsandbox's own layer; R without it has nothing to escape

mean.evil <- function(x, ...) Sys.getpid(); mean(structure(1, class = 'evil'))
