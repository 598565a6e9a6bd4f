# Results. The value an evaluation returns is the plain R value converted from JSON
# (never unserialized, never evaluated), with no attributes or class of this package.
# The full result (output, messages, warnings, plots, usage) is a separate object, an
# `rsandbox_result`: from `result = TRUE` or rsandbox_last_result().

as_result <- function(r) {
  structure(class = "rsandbox_result", list(
    value = result_value(r),
    visible = isTRUE(r$visible),
    outcome = r$outcome %||% NA_character_,
    stdout = r$stdout %||% "",
    stderr = r$stderr %||% "",
    messages = as.character(unlist(r$messages)),
    warnings = vapply(r$warnings, function(w) as.character(w$message %||% w)[1], character(1)),
    plots = lapply(r$plots, function(p) structure(list(data = jsonlite::base64_dec(p$data_base64)), class = "rsandbox_plot")),
    usage = r$usage,
    error = r$error,
    syntax_error = r$syntax_error,
    reset = isTRUE(r$reset),
    reset_reason = r$reset_reason,
    # [[ ]]: an absent field must read NULL, never another field whose name it begins
    # (R's `$` matches partially; the engine names no field after the start of another).
    network = network_records(r[["network"]]),
    refused_network = isTRUE(r$refused_network)
  ))
}

# Why the code's network attempts failed in a sandbox without the network, when no
# R error says so already (the engine ends such an error's message with it): the
# engine's words (EvalResult::NO_NETWORK), which every front shows.
# (One line: a test of the fronts crate finds it here, so the two cannot drift.)
no_network_note <- "network: this sandbox has no network: its profile gives it none, so every connection is refused (a server's operator can allow hosts: the profile's [network] table)"

# The connections the sandbox made through the network proxy, allowed or refused: a
# data frame, one row per connection (NULL when there was none). `address` and `reason`
# are NA where the record has none.
network_records <- function(records) {
  if (!length(records)) return(NULL)
  column <- function(name, empty) {
    vapply(records, function(x) if (is.null(x[[name]])) empty else as.vector(x[[name]], typeof(empty)), empty,
           USE.NAMES = FALSE)
  }
  data.frame(host = column("host", NA_character_), port = column("port", NA_real_),
             allowed = column("allowed", NA), address = column("address", NA_character_),
             bytes_in = column("bytes_in", NA_real_), bytes_out = column("bytes_out", NA_real_),
             duration_ms = column("duration_ms", NA_real_), reason = column("reason", NA_character_),
             stringsAsFactors = FALSE)
}

# A result's value: JSON as R. JSON has one kind of number, so every number comes
# back a double, R's default (42L and 42 are both `42` in JSON; `1:3` comes back as
# c(1, 2, 3)); objects come back as named lists, arrays of records as data frames.
json_value <- function(value) {
  if (is.null(value)) return(NULL)
  as_doubles(simplify_json(value))
}

as_doubles <- function(x) {
  if (is.integer(x) && !is.factor(x)) {
    storage.mode(x) <- "double"
  } else if (is.list(x) && length(x)) {
    x[] <- lapply(x, as_doubles)
  }
  x
}

`%||%` <- function(a, b) if (is.null(a)) b else a

#' @export
format.rsandbox_result <- function(x, ...) {
  ms <- x$usage$wall_ms
  head <- sprintf("<rsandbox_result: %s%s%s>", x$outcome, if (!is.null(ms)) sprintf(", %s ms", format(ms)) else "",
                  if (isTRUE(x$reset)) paste0(", session reset (", x$reset_reason, ")") else "")
  value <- if (is.null(x$value)) "NULL" else paste0(class(x$value)[1], " of length ", length(x$value))
  n <- length(x$plots)
  c(head, paste0("value: ", value, if (!isTRUE(x$visible)) " (invisible)" else "",
                 if (length(x$messages)) sprintf("; %d message(s)", length(x$messages)) else "",
                 if (length(x$warnings)) sprintf("; %d warning(s)", length(x$warnings)) else "",
                 if (n) sprintf("; %d plot(s) in $plots", n) else ""))
}

#' @export
print.rsandbox_result <- function(x, ...) {
  # The summary, then what a console would have shown: the output (auto-printed values
  # included), messages, warnings; all of it inert for the terminal.
  cat(format(x), sep = "\n")
  if (nzchar(x$stdout)) cat(inert(x$stdout), if (!endsWith(x$stdout, "\n")) "\n", sep = "")
  if (nzchar(x$stderr)) cat(inert(x$stderr), if (!endsWith(x$stderr, "\n")) "\n", sep = "")
  for (m in x$messages) cat(inert(m), if (!endsWith(m, "\n")) "\n", sep = "")
  for (w in x$warnings) cat("Warning: ", inert(w), "\n", sep = "")
  if (isTRUE(x$refused_network)) cat(no_network_note, "\n", sep = "")
  invisible(x)
}

#' @export
print.rsandbox_plot <- function(x, ...) {
  cat(sprintf("<rsandbox_plot: PNG, %d bytes>\n", length(x$data)))
  invisible(x)
}

#' Save a plot drawn in a sandbox
#'
#' @param plot An \code{rsandbox_plot}, from the \code{plots} of a full result
#'   (\code{rsandbox_eval(code, result = TRUE)$plots} or
#'   \code{rsandbox_last_result()$plots}).
#' @param path Where to write the PNG file.
#' @return \code{path}, invisibly.
#' @examples
#' if (rsandbox_available()) {
#'   r <- rsandbox_eval("plot(1:10)", result = TRUE)
#'   path <- tempfile(fileext = ".png")
#'   save_plot(r$plots[[1]], path)
#'   file.size(path) > 0
#'   unlink(path)
#' }
#' @export
save_plot <- function(plot, path) {
  if (!inherits(plot, "rsandbox_plot")) bad_input("{.arg plot} must be an {.cls rsandbox_plot}, not {describe(plot)}.")
  if (!is.character(path) || length(path) != 1L || is.na(path)) bad_input("{.arg path} must be a file path, not {describe(path)}.")
  writeBin(plot$data, path)
  invisible(path)
}
