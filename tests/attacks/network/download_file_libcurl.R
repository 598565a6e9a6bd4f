# category: network
# summary: download.file with libcurl
# expect: outcome=error
# expect-error-contains: cannot open
# targets: listener:tcp
# calibrate: yes
# calibrate-expect-exit: 1
# calibrate-expect-received: tcp

options(timeout = 3)
download.file("http://127.0.0.1:{{TCP_PORT}}/x", "x", method = "libcurl", quiet = TRUE)
