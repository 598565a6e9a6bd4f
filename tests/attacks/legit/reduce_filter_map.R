# category: legit
# summary: functional helpers
# expect: outcome=ok
# expect-value: {"r": [1, 3, 6, 10, 15], "f": [2, 4, 6, 8, 10]}
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

list(r = Reduce(`+`, 1:5, accumulate = TRUE), f = Filter(function(x) x %% 2 == 0, 1:10))
