# category: legit
# summary: vectorised sprintf and paste
# expect: outcome=ok
# expect-value: "a=1&b=2"
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

paste0(sprintf("%s=%d", c("a", "b"), 1:2), collapse = "&")
