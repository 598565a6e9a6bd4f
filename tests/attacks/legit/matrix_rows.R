# category: legit
# summary: matrices become arrays of rows
# expect: outcome=ok
# expect-value: [[1, 3, 5], [2, 4, 6]]
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

matrix(1:6, nrow = 2)
