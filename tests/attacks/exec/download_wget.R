# category: exec
# summary: download.file(method = "wget") runs wget
# expect: outcome=violation
# expect-violation: execve
# targets: listener:tcp
# calibrate: yes
# calibrate-expect-exit: 1
# calibrate-expect-received: tcp
# compile-expect: outcome=error — wget is not listed (and no socket could be made anyway)

download.file("http://127.0.0.1:{{TCP_PORT}}/x", "x", method = "wget", extra = "--timeout=2 --tries=1", quiet = TRUE)
