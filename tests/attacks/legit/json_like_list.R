# category: legit
# summary: a nested list becomes a JSON object
# expect: outcome=ok
# expect-value: {"id": 7, "tags": ["x", "y"], "nested": {"ok": true, "none": null}}
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

list(id = 7L, tags = c("x", "y"), nested = list(ok = TRUE, none = NULL))
