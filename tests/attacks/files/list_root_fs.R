# category: files
# summary: list the root directory
# expect: outcome=ok
# expect-value: []
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: etc

list.files("/")
