# category: files
# summary: list the host's /tmp (other sandboxes' workspaces, planted secrets)
# expect: outcome=ok
# expect-value: []
# nolandlock-loses: without Landlock the private root's skeleton can be listed: /tmp shows the directory that holds its own workspace, nothing of the host's
# targets: secret:tmp
# calibrate: yes
# calibrate-expect-stdout-contains: rsandbox-attack-secret

list.files("/tmp", pattern = "rsandbox")
