# category: files
# summary: look into PID 1's root directory through /proc/1/root
# expect: outcome=ok
# expect-value: []
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: passwd

list.files("/proc/1/root/etc")
