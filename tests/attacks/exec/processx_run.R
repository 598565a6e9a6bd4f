# category: exec
# summary: processx::run starts a program
# expect: outcome=violation|error
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

print(processx::run("echo", "ATTACK-SUCCEEDED")$stdout)
