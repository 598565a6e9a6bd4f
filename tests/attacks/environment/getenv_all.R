# category: environment
# summary: print the whole environment
# expect: outcome=ok
# expect-stdout-contains: R_HOME
# expect-stdout-not: RSANDBOX_ATTACK_TOKEN
# targets: secret:env
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

print(Sys.getenv())
