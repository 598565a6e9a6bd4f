# category: legit
# summary: date arithmetic and formatting
# expect: outcome=ok
# expect-value: {"next_day": "2024-02-01", "months": ["2024-01", "2024-03", "2024-03"], "weekday": "Thursday"}
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

d <- as.Date("2024-01-31")
list(next_day = format(d + 1), months = format(seq(d, by = "month", length.out = 3), "%Y-%m"), weekday = weekdays(as.Date("2024-02-29")))
