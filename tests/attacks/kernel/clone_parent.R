# category: kernel
# summary: clone(2) with CLONE_PARENT: a process made the sibling of the sandbox's R (a child of the zygote) would escape the supervisor's search for the sandbox's processes and its clean-up
# expect: outcome=violation
# expect-violation: clone
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_clone_parent", "", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
