# category: legit
# summary: ordinary recursion
# expect: outcome=ok
# expect-value: 6765
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

fib <- function(n) if (n < 2) n else fib(n - 1) + fib(n - 2)
fib(20)
