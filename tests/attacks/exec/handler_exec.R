# category: exec
# summary: a command run from an error handler
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

tryCatch(stop("x"), error = function(e) system("echo ATTACK-SUCCEEDED"))
