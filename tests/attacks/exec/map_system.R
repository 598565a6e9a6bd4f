# category: exec
# summary: system applied through Map
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

invisible(Map(system, "echo ATTACK-SUCCEEDED"))
