# category: exec
# summary: download.file(method = "curl") runs curl
# expect: outcome=violation
# expect-violation: execve
# targets: listener:tcp
# calibrate: yes
# calibrate-expect-exit: 1
# calibrate-expect-received: tcp
# compile-expect: outcome=error — curl is not listed (and no socket could be made anyway)

download.file("http://127.0.0.1:{{TCP_PORT}}/x", "x", method = "curl", extra = "--max-time 2", quiet = TRUE)
