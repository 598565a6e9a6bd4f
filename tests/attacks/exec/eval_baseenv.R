# category: exec
# summary: eval() of a quoted call in baseenv()
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

eval(quote(system("echo ATTACK-SUCCEEDED")), baseenv())
