# category: files
# summary: list the root directory
# expect: outcome=ok
# expect-value: []
# nolandlock-loses: without Landlock the private root's skeleton can be listed: the names of its mount points (bin, dev, etc, usr, …), nothing of the host's
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: etc

list.files("/")
