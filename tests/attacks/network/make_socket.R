# category: network
# summary: utils::make.socket + write.socket
# expect: outcome=error
# expect-error-contains: socket not established
# targets: listener:tcp
# calibrate: yes
# calibrate-expect-stdout-contains: sent
# calibrate-expect-received: tcp

s <- utils::make.socket("127.0.0.1", {{TCP_PORT}})
utils::write.socket(s, "ATTACK-SUCCEEDED\n")
utils::close.socket(s)
cat("sent\n")
