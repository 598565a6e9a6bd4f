# category: files
# summary: list the host's /tmp (other sandboxes' workspaces, planted secrets)
# expect: outcome=ok
# expect-value: []
# targets: secret:tmp
# calibrate: yes
# calibrate-expect-stdout-contains: rsandbox-attack-secret

list.files("/tmp", pattern = "rsandbox")
