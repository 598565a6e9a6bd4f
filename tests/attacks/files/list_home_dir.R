# category: files
# summary: list the identity's home directory (file names alone leak)
# expect: outcome=ok
# expect-value: []
# targets: secret:home
# calibrate: yes
# calibrate-expect-stdout-contains: rsandbox-attack-secret.txt

list.files("{{HOME}}", all.files = TRUE, no.. = TRUE)
