# category: legit
# summary: two plots give two PNGs
# expect: outcome=ok
# expect-plots: 2
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

plot(1:10)
hist(rnorm(100))
