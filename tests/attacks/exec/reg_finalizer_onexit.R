# category: exec
# summary: a finalizer that runs a command when R exits
# expect: outcome=ok|violation
# expect-violation: execve
# expect-stdout-contains: finalizer registered
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

e <- new.env()
reg.finalizer(e, function(e) system("echo ATTACK-SUCCEEDED"), onexit = TRUE)
rm(e)
cat("finalizer registered\n")
