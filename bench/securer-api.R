# securer's API on rsandbox (use_securer_api) against callr's r_session, the process
# securer itself is built on (securer cannot be installed here: its S7 dependency is not
# in Debian and CRAN is unreachable), run side by side in one R process. Medians.
#
#   cargo build --release && R CMD INSTALL r/rsandbox
#   RSANDBOX_BIN=target/release/rsandbox Rscript bench/securer-api.R
library(rsandbox)
api <- securer_api()
ms <- function(expr, n) {
  expr <- substitute(expr)
  env <- parent.frame()
  1000 * median(replicate(n, system.time(eval(expr, env))[["elapsed"]]))
}
invisible(api$execute_r("1"))  # the rsandbox server starts once per R session
row <- function(what, ours, theirs) {
  cat(sprintf("| %s | %.1f ms | %.1f ms | %.0fx |\n", what, ours, theirs, theirs / max(ours, 0.1)))
}
cat("| operation | rsandbox (securer API) | callr r_session | ratio |\n|---|---|---|---|\n")
row("new session + close", ms({ s <- api$SecureSession$new(sandbox = TRUE); s$close() }, 20),
    ms({ s <- callr::r_session$new(); s$close() }, 10))
s <- api$SecureSession$new(sandbox = TRUE)
r <- callr::r_session$new()
row("execute 1+1", ms(s$execute("1 + 1"), 200), ms(r$run(function() 1 + 1), 100))
row("pool of 4: create + close", ms({ p <- api$SecureSessionPool$new(4); p$close() }, 5),
    ms({ l <- lapply(1:4, function(i) callr::r_session$new()); for (x in l) x$close() }, 5))
s$close()
r$close()
