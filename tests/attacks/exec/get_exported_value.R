# category: exec
# summary: system through getExportedValue
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

getExportedValue("base", "system")("echo ATTACK-SUCCEEDED")
