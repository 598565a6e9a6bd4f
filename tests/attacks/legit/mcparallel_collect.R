# category: legit
# summary: mcparallel + mccollect
# expect: outcome=ok
# expect-value: 5050
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

p <- parallel::mcparallel(sum(1:100))
parallel::mccollect(p)[[1]]
