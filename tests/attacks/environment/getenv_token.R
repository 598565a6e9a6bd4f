# category: environment
# summary: read the supervisor's secret environment variable
# expect: outcome=ok
# expect-stdout: token: []\n
# targets: secret:env
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

cat("token: [", Sys.getenv("RSANDBOX_ATTACK_TOKEN"), "]\n", sep = "")
