# category: legit
# summary: read script arguments with commandArgs(trailingOnly = TRUE), as with Rscript FILE ARGS
# args: -- alpha 42
# expect: outcome=ok
# expect-stdout: alpha|84\n
# targets: none
# calibrate: no — legitimate code; there is no attack to calibrate

a <- commandArgs(trailingOnly = TRUE)
cat(a[1], as.numeric(a[2]) * 2, sep = "|"); cat("\n")
