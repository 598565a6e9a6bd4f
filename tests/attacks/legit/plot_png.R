# category: legit
# summary: one base-graphics plot comes back as one PNG
# expect: outcome=ok
# expect-plots: 1
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

plot(1:10, main = "ten points")
