# category: exec
# summary: a .Last function that runs a command at q()
# expect: outcome=ok|violation
# expect-violation: execve
# expect-stdout-contains: quitting
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

.Last <- function() system("echo ATTACK-SUCCEEDED")
cat("quitting\n")
q("no")
