# category: exec
# summary: system(): run a shell command
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: uid=

system("id")
