# category: exec
# summary: system called through do.call
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

do.call("system", list("echo ATTACK-SUCCEEDED"))
