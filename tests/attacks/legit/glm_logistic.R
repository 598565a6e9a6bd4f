# category: legit
# summary: a logistic regression
# expect: outcome=ok
# expect-value: {"(Intercept)": 12.04, "wt": -4.024}
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

round(coef(glm(am ~ wt, data = mtcars, family = binomial)), 3)
