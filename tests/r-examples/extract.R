# Extract the examples of R's base packages' help pages, one file per page, as
# example() would run them without \dontrun and \donttest sections:
#   Rscript --vanilla tests/r-examples/extract.R OUTDIR [PKG ...]
# writes OUTDIR/PKG/TOPIC.R (pages without examples are skipped) and OUTDIR/R_VERSION
# (R.version.string: the plain-R baseline is valid for that version only). Runs on the
# host, in plain R: this is trusted code of ours reading R's own help database.
args <- commandArgs(trailingOnly = TRUE)
if (length(args) < 1L) stop("usage: extract.R OUTDIR [PKG ...]")
out <- args[[1L]]
pkgs <- args[-1L]
if (!length(pkgs))
    pkgs <- c("base", "stats", "utils", "graphics", "grDevices", "methods",
              "datasets", "tools", "grid", "splines")
dir.create(out, recursive = TRUE, showWarnings = FALSE)
writeLines(R.version.string, file.path(out, "R_VERSION"))
for (p in pkgs) {
    db <- tools::Rd_db(p)
    d <- file.path(out, p)
    dir.create(d, recursive = TRUE, showWarnings = FALSE)
    n <- 0L
    for (nm in sort(names(db))) {
        f <- file.path(d, sub("\\.Rd$", ".R", basename(nm)))
        tools::Rd2ex(db[[nm]], f, commentDontrun = TRUE, commentDonttest = TRUE)
        if (file.exists(f)) n <- n + 1L
    }
    cat(sprintf("%-10s %4d help pages, %4d with examples\n", p, length(db), n))
}
