# category: environment
# summary: HOME must be the workspace, not the identity's home
# expect: outcome=ok
# expect-stdout-contains: HOME is the workspace: TRUE
# expect-stdout-not: HOME={{HOME}}\n
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: HOME={{HOME}}

# The workspace is /tmp/rsandbox-*/ws-N, or /dev/shm/rsandbox-*/ws-N with a disk quota.
cat("HOME=", Sys.getenv("HOME"), " cwd=", getwd(), "\n", sep = "")
cat("HOME is the workspace:", identical(Sys.getenv("HOME"), getwd()) && grepl("/rsandbox-[0-9]+-[0-9a-f]+/ws-[0-9]+$", getwd()), "\n")
