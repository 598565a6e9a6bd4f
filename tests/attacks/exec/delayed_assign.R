# category: exec
# summary: a command hidden in a promise, forced later
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

delayedAssign("x", system("echo ATTACK-SUCCEEDED"))
x
