# category: legit
# summary: solve a linear system
# expect: outcome=ok
# expect-value: [0.2, 0.6]
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

solve(matrix(c(2, 1, 1, 3), 2), c(1, 2))
