# category: exec
# summary: pipe() connection running a shell command
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

cat(readLines(pipe("echo ATTACK-SUCCEEDED")), "\n")
