# category: legit
# summary: numerical integration and optimisation
# expect: outcome=ok
# expect-value: {"area": 1, "min": 2}
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

list(area = round(integrate(dnorm, -Inf, Inf)$value, 6),
     min = round(optimize(function(x) (x - 2)^2, c(0, 5))$minimum, 4))
