# category: legit
# summary: printing goes to stdout exactly as Rscript prints it
# expect: outcome=ok
# expect-stdout: a b \n1 2 \ndone\n
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

x <- c(a = 1, b = 2)
print(x)
cat("done\n")
