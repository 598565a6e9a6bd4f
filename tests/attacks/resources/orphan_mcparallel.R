# category: resources
# summary: leave a forked child sleeping after the evaluation ends
# args: --timeout 10
# expect: outcome=ok
# expect-stdout-contains: parent done
# targets: host:resources
# calibrate: no — the check is that nothing survives the sandbox; unsandboxed it would

p <- parallel::mcparallel(Sys.sleep(999))
cat("parent done, child", p$pid, "left behind\n")
