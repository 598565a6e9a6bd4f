# category: exec
# summary: system(): run a shell command
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: uid=
# compile-expect: outcome=ok — the shell may run under compile, id is not listed: the shell says Permission denied, system() returns 126

system("id")
