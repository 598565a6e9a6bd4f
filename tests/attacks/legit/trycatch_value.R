# category: legit
# summary: errors handled with tryCatch
# expect: outcome=ok
# expect-value: "caught: inner"
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

tryCatch(stop("inner"), error = function(e) paste("caught:", conditionMessage(e)))
