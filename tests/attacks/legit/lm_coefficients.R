# category: legit
# summary: a linear model's coefficients
# expect: outcome=ok
# expect-value: {"(Intercept)": 37.2851, "wt": -5.3445}
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

round(coef(lm(mpg ~ wt, mtcars)), 4)
