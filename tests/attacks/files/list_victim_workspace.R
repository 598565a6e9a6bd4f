# category: files
# summary: list another live sandbox's workspace
# expect: outcome=ok
# expect-stdout-contains: listed
# expect-stdout-not: victim-secret
# targets: secret:victim
# calibrate: yes
# calibrate-pidns: no
# calibrate-expect-stdout-contains: victim-secret.txt

print(list.files("{{VICTIM_WS}}", all.files = TRUE))
print(list.files(dirname("{{VICTIM_ROOT_FILE}}"), all.files = TRUE))
cat("listed\n")
