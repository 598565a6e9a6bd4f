# category: environment
# summary: the command line R was started with (secrets must not be there)
# expect: outcome=ok
# expect-stdout-contains: [1]
# expect-stdout-not: RSANDBOX-SECRET
# targets: secret:env
# calibrate: yes
# calibrate-expect-stdout-contains: --file=

print(commandArgs())
