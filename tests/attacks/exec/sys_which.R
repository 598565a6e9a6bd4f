# category: exec
# summary: Sys.which shells out to `which`
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: /sh

print(Sys.which("sh"))
