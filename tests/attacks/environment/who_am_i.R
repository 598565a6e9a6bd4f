# category: environment
# summary: the user name of the sandbox (root must not show through)
# expect: outcome=ok
# expect-stdout-contains: user:
# expect-stdout-not: user: root 
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: user: root 

cat("user:", Sys.info()[["user"]], "\n")
