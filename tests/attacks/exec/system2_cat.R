# category: exec
# summary: system2() with separate arguments
# expect: outcome=violation
# expect-violation: execve
# targets: secret:etc
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET
# compile-expect: outcome=ok — cat is listed and runs, inside Landlock: the secret stays unreadable (cat fails, system2 returns its status)

system2("cat", "{{ETC_SECRET}}")
