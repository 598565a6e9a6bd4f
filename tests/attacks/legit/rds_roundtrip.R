# category: legit
# summary: saveRDS / readRDS in the workspace
# expect: outcome=ok
# expect-value: {"a": 1, "b": "x"}
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

saveRDS(list(a = 1, b = "x"), "o.rds")
readRDS("o.rds")
