# category: resources
# summary: unbounded R recursion
# expect: outcome=error
# expect-error-contains: C stack usage
# targets: host:resources
# calibrate: no — R stops the recursion the same way outside the sandbox; the point is a clean error instead of a crash

f <- function(n) f(n + 1)
f(1)
