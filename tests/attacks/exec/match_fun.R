# category: exec
# summary: system found by match.fun on a computed name
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

match.fun(paste(c("sys", "tem"), collapse = ""))("echo ATTACK-SUCCEEDED")
