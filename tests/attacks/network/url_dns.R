# category: network
# summary: url() to a host name: the name has to be resolved first
# expect: outcome=error
# expect-error-contains: cannot open
# targets: listener:dns
# calibrate: yes
# calibrate-expect-exit: 1
# calibrate-expect-received: dns

options(timeout = 3)
readLines(url("http://{{DNS_NAME}}/"))
