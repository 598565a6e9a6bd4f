#' Learn a profile for code you trust
#'
#' Runs the code in sandboxes in learning mode (\code{rsandbox learn}): each run,
#' whatever the kernel refused it (files read or written, programs, forbidden calls)
#' is added, until it runs to the end. The profile is returned as text, never written
#' by itself: review it, then \code{writeLines(learned$profile, "job.toml")} and use
#' \code{profile = "job.toml"}.
#'
#' @param code A string, or an unevaluated expression (\code{quote()} or a braced block).
#' @param profile The profile to start from, as for \code{\link{rsandbox_eval}}.
#' @param timeout Seconds, for each run.
#' @return An object of class \code{rsandbox_learned}: \code{profile} (the TOML text;
#'   \code{NULL} when the code could not run to the end), \code{notes} (what was added
#'   and why, what could not be), \code{succeeded} (\code{FALSE} also when the code made
#'   forbidden calls, which no profile grants: \code{profile} then names them). An
#'   \code{rsandbox_input_error} or \code{rsandbox_setup_error} condition when learning
#'   could not start.
#' @examples
#' if (rsandbox_available()) {
#'   learned <- rsandbox_learn("nchar(Sys.getenv('HOME'))")
#'   learned
#' }
#' @export
rsandbox_learn <- function(code, profile = NULL, timeout = 30) {
  call <- rlang::current_env()
  text <- check_code(code)
  timeout <- check_timeout(timeout)
  args <- profile_args(profile)
  file <- tempfile("rsandbox-learn-", fileext = ".R")
  on.exit(unlink(file))
  writeLines(text, file)
  args <- c("learn", "--timeout", format(timeout), args, file)
  out <- preserving_seed(processx::run(rsandbox_binary(), args, error_on_status = FALSE,
                                       env = c("current", RSANDBOX_NO_DAEMON = "1")))
  said <- strsplit(out$stderr, "\n", fixed = TRUE)[[1]]
  if (!out$status %in% c(0L, 1L)) {
    class <- if (out$status == 2L) "rsandbox_input_error" else "rsandbox_setup_error"
    rsandbox_abort(class, paste(sub("^rsandbox( learn)?: ", "", said[nzchar(said)]), collapse = " "), state_kept = NA, call = call)
  }
  notes <- sub("^rsandbox learn: ", "", said[startsWith(said, "rsandbox learn: ")])
  structure(list(profile = if (nzchar(out$stdout)) out$stdout else NULL, notes = notes, succeeded = out$status == 0L),
            class = "rsandbox_learned")
}

#' @export
print.rsandbox_learned <- function(x, ...) {
  cat(if (x$succeeded) "learned (review before use):\n" else "learning did not succeed:\n")
  if (!is.null(x$profile)) cat(inert(x$profile), if (!endsWith(x$profile, "\n")) "\n", sep = "")
  for (note in x$notes) cat("# ", inert(note), "\n", sep = "")
  invisible(x)
}
