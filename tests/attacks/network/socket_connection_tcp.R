# category: network
# summary: socketConnection to a TCP listener on the host's 127.0.0.1
# expect: outcome=error
# expect-error-contains: cannot open
# targets: listener:tcp
# calibrate: yes
# calibrate-expect-stdout-contains: sent
# calibrate-expect-received: tcp

con <- socketConnection("127.0.0.1", {{TCP_PORT}}, blocking = TRUE, timeout = 3)
writeLines("ATTACK-SUCCEEDED", con)
close(con)
cat("sent\n")
