# category: exec
# summary: trace() injects a command into print()
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

trace(print, quote(system("echo ATTACK-SUCCEEDED")), print = FALSE)
print(1)
