# category: environment
# summary: HOME must be the workspace, not the identity's home
# expect: outcome=ok
# expect-stdout-contains: HOME=/tmp/rsandbox-
# expect-stdout-not: HOME={{HOME}}\n
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: HOME={{HOME}}

cat("HOME=", Sys.getenv("HOME"), " cwd=", getwd(), "\n", sep = "")
