# category: legit
# summary: aggregate a data frame by group
# expect: outcome=ok
# expect-value: [{"cyl": 4, "mpg": 26.66}, {"cyl": 6, "mpg": 19.74}, {"cyl": 8, "mpg": 15.1}]
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

a <- aggregate(mpg ~ cyl, data = mtcars, FUN = mean)
a$mpg <- round(a$mpg, 2)
a
