# category: legit
# summary: integer arithmetic
# expect: outcome=ok
# expect-value: {"and": 8, "div": 3, "mod": 2, "big": 2147483647}
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

list(and = bitwAnd(12L, 10L), div = 17L %/% 5L, mod = -7 %% 3, big = .Machine$integer.max)
