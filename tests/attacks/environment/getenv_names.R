# category: environment
# summary: list the names of the environment variables
# expect: outcome=ok
# expect-stdout-contains: PATH
# expect-stdout-not: RSANDBOX_ATTACK
# expect-stdout-not: AWS_
# expect-stdout-not: USER
# targets: secret:env
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX_ATTACK_TOKEN

cat(sort(names(Sys.getenv())), sep = "\n")
