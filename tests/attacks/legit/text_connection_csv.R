# category: legit
# summary: read.csv from a text connection
# expect: outcome=ok
# expect-value: 3
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

d <- read.csv(text = "a,b\n1,x\n2,y")
sum(d$a)
