# category: protocol
# summary: make 15000 files and 70-deep directories so that --output floods the host
# args: --output {{OUTPUT_DIR}} --max-output 200k --timeout 60
# expect: outcome=ok
# expect-stdout-contains: made 15000
# targets: host:resources
# calibrate: no — --output is rsandbox's own feature; nothing to run unsandboxed

# The listing stops at 10000 files and 64 levels; the copy stops at --max-output bytes
# in all (the CLI refuses the rest with an error rather than write past it).
for (i in seq_len(15000)) writeBin(as.raw(1:10), sprintf("f%05d", i))
p <- "d"; for (i in 1:70) p <- file.path(p, "d")
dir.create(p, recursive = TRUE); writeLines("bottom", file.path(p, "x"))
cat("made 15000\n")
