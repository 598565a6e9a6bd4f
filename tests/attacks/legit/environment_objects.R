# category: legit
# summary: environments as mutable state
# expect: outcome=ok
# expect-value: 3
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

counter <- local({ n <- 0; function() { n <<- n + 1; n } })
counter(); counter(); counter()
