# category: legit
# summary: write and read files in the workspace and tempdir()
# expect: outcome=ok
# expect-value: ["alpha", "beta", "u", "v"]
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

writeLines(c("alpha", "beta"), "a.txt")
f <- file.path(tempdir(), "b.csv")
write.csv(data.frame(x = 1:2, y = c("u", "v")), f, row.names = FALSE)
c(readLines("a.txt"), read.csv(f)$y)
