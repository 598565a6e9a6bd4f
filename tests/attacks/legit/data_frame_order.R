# category: legit
# summary: sort and subset a data frame
# expect: outcome=ok
# expect-value: [{"name": "a", "score": 3}, {"name": "b", "score": 2}, {"name": "c", "score": 1}]
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

d <- data.frame(name = c("b", "a", "c"), score = c(2, 3, 1))
d[order(-d$score), ]
