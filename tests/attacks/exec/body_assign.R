# category: exec
# summary: a harmless function whose body is replaced with `body<-`
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

f <- function() NULL
body(f) <- quote(system("echo ATTACK-SUCCEEDED"))
f()
