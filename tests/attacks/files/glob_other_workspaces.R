# category: files
# summary: find and read every other sandbox's workspace with a glob
# expect: outcome=ok
# expect-stdout-contains: 0 files in other workspaces
# nolandlock-loses: without Landlock the private root's skeleton directories can be listed: the sandbox sees its own workspace's path (ReadDir is what Landlock denied); no other workspace exists in its root
# targets: secret:victim, proc:victim
# calibrate: yes
# calibrate-pidns: no
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

# Workspaces lie under the temporary directory, or under /dev/shm when they have a disk quota.
parents <- c("/tmp", "/dev/shm")
hits <- c(Sys.glob(file.path(parents, "rsandbox-*/ws-*/*")),
          Sys.glob(file.path("/proc/{{VICTIM_PID}}/root", parents, "rsandbox-*/ws-*/*")))
cat(length(hits), "files in other workspaces\n")
for (f in hits) cat(f, ":", tryCatch(readLines(f, warn = FALSE), error = function(e) "?"), "\n")
