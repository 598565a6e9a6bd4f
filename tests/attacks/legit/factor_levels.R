# category: legit
# summary: factors become their labels
# expect: outcome=ok
# expect-value: ["lo", "hi", "lo"]
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

factor(c("lo", "hi", "lo"), levels = c("lo", "hi"))
