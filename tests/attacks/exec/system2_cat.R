# category: exec
# summary: system2() with separate arguments
# expect: outcome=violation
# expect-violation: execve
# targets: secret:etc
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

system2("cat", "{{ETC_SECRET}}")
