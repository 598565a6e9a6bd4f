# category: legit
# summary: set.seed gives the same numbers every time
# expect: outcome=ok
# expect-value: [0.914806, 0.937075, 0.286140]
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

set.seed(42); round(runif(3), 6)
