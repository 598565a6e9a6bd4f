# category: files
# summary: find and read every other sandbox's workspace with a glob
# expect: outcome=ok
# expect-stdout-contains: 0 files in other workspaces
# nolandlock-loses: without Landlock the private root's skeleton directories can be listed: the sandbox sees its own workspace's path (ReadDir is what Landlock denied); no other workspace exists in its root
# targets: secret:victim, proc:victim
# calibrate: yes
# calibrate-pidns: no
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

hits <- c(Sys.glob("/tmp/rsandbox-*/ws-*/*"), Sys.glob("/proc/{{VICTIM_PID}}/root/tmp/rsandbox-*/ws-*/*"))
cat(length(hits), "files in other workspaces\n")
for (f in hits) cat(f, ":", tryCatch(readLines(f, warn = FALSE), error = function(e) "?"), "\n")
