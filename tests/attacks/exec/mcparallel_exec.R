# category: exec
# summary: a command run from a forked child (mcparallel)
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

p <- parallel::mcparallel(system("echo ATTACK-SUCCEEDED", intern = TRUE))
print(parallel::mccollect(p))
