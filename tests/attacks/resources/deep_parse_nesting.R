# category: resources
# summary: 100000 nested parentheses
# expect: outcome=error
# expect-error-contains: overflow
# targets: host:resources
# calibrate: no — the parser stops it the same way outside the sandbox

eval(parse(text = paste0(strrep("(", 1e5), "1", strrep(")", 1e5))))
