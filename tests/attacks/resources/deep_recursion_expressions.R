# category: resources
# summary: unbounded recursion with the expression limit raised
# expect: outcome=error
# expect-error-contains: stack
# targets: host:resources
# calibrate: no — R stops the recursion the same way outside the sandbox

options(expressions = 5e5)
f <- function(n) f(n + 1)
f(1)
