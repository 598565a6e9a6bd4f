# category: environment
# summary: read a cloud credential from the environment
# expect: outcome=ok
# expect-stdout: aws: []\n
# targets: secret:env
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

cat("aws: [", Sys.getenv("AWS_SECRET_ACCESS_KEY"), "]\n", sep = "")
