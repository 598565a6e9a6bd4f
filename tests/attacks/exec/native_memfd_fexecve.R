# category: exec
# summary: memfd_create + fexecve: run a program that never touches the file system (memfd refused: fexecve of a file of our own)
# expect: outcome=violation
# expect-violation: execveat|execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED
# compile-expect: outcome=error — memfd_create is refused and the fallback program is a workspace file, which has no execute right

hex <- "{{PROBE_HEX}}"
writeBin(as.raw(strtoi(substring(hex, seq(1, nchar(hex), 2), seq(2, nchar(hex), 2)), 16L)), "probe.so")
dyn.load(file.path(getwd(), "probe.so"))
res <- .C("probe_memfd_fexecve", "", 0L, res = -1L)$res
if (res == 0L) cat("ATTACK-SUCCEEDED\n") else stop("blocked: errno ", res)
