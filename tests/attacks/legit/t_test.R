# category: legit
# summary: a two-sample t test
# expect: outcome=ok
# expect-value: 0.001374
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

round(t.test(mpg ~ am, data = mtcars)$p.value, 6)
