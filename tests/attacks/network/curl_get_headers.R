# category: network
# summary: curlGetHeaders (libcurl)
# expect: outcome=error
# expect-error-contains: Couldn't connect
# targets: listener:tcp
# calibrate: yes
# calibrate-expect-exit: 1
# calibrate-expect-received: tcp

curlGetHeaders("http://127.0.0.1:{{TCP_PORT}}/", timeout = 3)
