# category: exec
# summary: system fetched from the base namespace object
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

f <- get("system", envir = asNamespace("base"))
f("echo ATTACK-SUCCEEDED")
