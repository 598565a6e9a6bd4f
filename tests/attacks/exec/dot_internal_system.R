# category: exec
# summary: .Internal(system()) directly, bypassing the R wrapper
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

invisible(.Internal(system("echo ATTACK-SUCCEEDED", FALSE, 0)))
