# category: legit
# summary: string functions
# expect: outcome=ok
# expect-value: {"up": "ABC", "parts": ["a", "b", "", "c"], "fmt": "003.1|x  |", "n": 5}
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

list(up = toupper("abc"), parts = strsplit("a,b,,c", ",")[[1]], fmt = sprintf("%05.1f|%-3s|", 3.14159, "x"), n = nchar("h\u00e9llo"))
