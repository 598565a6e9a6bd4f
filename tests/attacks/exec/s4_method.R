# category: exec
# summary: a command hidden in an S4 method
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

setGeneric("runit", function(x) standardGeneric("runit"))
setMethod("runit", "character", function(x) system(x))
runit("echo ATTACK-SUCCEEDED")
