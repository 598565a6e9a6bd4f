# category: exec
# summary: browseURL with a "browser" that is any command (here: touch)
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: created: TRUE

browseURL("pwned-by-browser", browser = "touch")
Sys.sleep(1)
cat("created:", file.exists("pwned-by-browser"), "\n")
