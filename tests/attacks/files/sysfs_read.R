# category: files
# summary: read sysfs (hardware details of the host)
# expect: outcome=error
# expect-error-contains: cannot open
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: 0

cat(readLines("/sys/devices/system/cpu/online"), "\n")
