# category: exec
# summary: callr::r starts a new R process
# expect: outcome=violation|error
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-timeout: 60
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

print(callr::r(function() "ATTACK-SUCCEEDED"))
