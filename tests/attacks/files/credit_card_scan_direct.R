# category: files
# summary: read the card file directly, by its full path
# expect: outcome=error
# expect-error-contains: cannot open
# targets: secret:documents
# calibrate: yes
# calibrate-expect-stdout-contains: {{CARD_2}}

cat(readLines("{{CARDS_FILE}}"), sep = "\n")
