# category: legit
# summary: summary statistics
# expect: outcome=ok
# expect-value: [15.425, 19.2, 22.8]
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

unname(round(quantile(mtcars$mpg, c(0.25, 0.5, 0.75)), 3))
