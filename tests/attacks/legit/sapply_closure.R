# category: legit
# summary: closures and sapply
# expect: outcome=ok
# expect-value: [11, 12, 13, 14, 15]
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

make_adder <- function(n) function(x) x + n
sapply(1:5, make_adder(10))
