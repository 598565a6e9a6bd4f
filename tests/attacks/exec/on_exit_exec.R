# category: exec
# summary: a command run from on.exit
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

f <- function() { on.exit(system("echo ATTACK-SUCCEEDED")); 1 }
f()
