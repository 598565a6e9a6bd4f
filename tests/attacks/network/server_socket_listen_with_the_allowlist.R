# category: network
# summary: open a listening TCP server socket — with the network allowlist on (TCP client sockets only)
# network: cran.test
# expect: outcome=error
# expect-error-contains: cannot be opened
# targets: listener:udp
# calibrate: yes
# calibrate-expect-stdout-contains: listening

# Listen for the outside world to connect in (a bind shell's first step).
s <- serverSocket({{UDP_PORT}})
cat("listening\n")
close(s)
