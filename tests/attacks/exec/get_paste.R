# category: exec
# summary: system found by get(paste0(...)) to dodge a static scan
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

get(paste0("sys", "tem"))("echo ATTACK-SUCCEEDED")
