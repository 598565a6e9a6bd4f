# category: legit
# summary: count with table()
# expect: outcome=ok
# expect-value: {"4": 11, "6": 7, "8": 14}
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

c(table(mtcars$cyl))
