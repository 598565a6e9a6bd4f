# category: legit
# summary: regular expressions: gsub, regmatches, grepl
# expect: outcome=ok
# expect-value: {"sub": "t<e><a>", "words": ["apple", "banana", "cherry"], "has_an": [false, true, false]}
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

s <- c("apple pie", "banana split", "cherry tart")
list(sub = gsub("([aeiou])", "<\\1>", "tea"), words = unlist(regmatches(s, regexpr("^[a-z]+", s))), has_an = grepl("an", s))
