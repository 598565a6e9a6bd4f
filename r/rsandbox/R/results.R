# Results: the value as an ordinary R object, with what else the evaluation produced
# in attributes. Converted from JSON only (never unserialized, never evaluated).

as_result <- function(r) {
  value <- if (is.null(r$value)) NULL else simplify_json(r$value)
  plots <- lapply(r$plots, function(p) structure(list(data = jsonlite::base64_dec(p$data_base64)), class = "rsandbox_plot"))
  out <- if (is.null(value)) list() else value
  attr(out, "stdout") <- r$stdout %||% ""
  attr(out, "stderr") <- r$stderr %||% ""
  attr(out, "messages") <- as.character(unlist(r$messages))
  attr(out, "warnings") <- vapply(r$warnings, function(w) w$message, character(1))
  attr(out, "plots") <- plots
  attr(out, "usage") <- r$usage
  attr(out, "outcome") <- r$outcome
  attr(out, "visible") <- isTRUE(r$visible)
  class(out) <- c("rsandbox_result", oldClass(out))
  out
}

`%||%` <- function(a, b) if (is.null(a)) b else a

#' @export
print.rsandbox_result <- function(x, ...) {
  # What a console would have shown: the output (auto-printed values included), then
  # messages and warnings.
  out <- attr(x, "stdout")
  if (length(out) && nzchar(out)) cat(out)
  for (m in attr(x, "messages")) message(m, appendLF = FALSE)
  for (w in attr(x, "warnings")) message("Warning message:\n", w)
  n <- length(attr(x, "plots"))
  if (n) cat(sprintf("[%d plot(s): save_plot(attr(x, \"plots\")[[i]], path)]\n", n))
  invisible(x)
}

#' @export
print.rsandbox_plot <- function(x, ...) {
  cat(sprintf("<rsandbox_plot: PNG, %d bytes>\n", length(x$data)))
  invisible(x)
}

#' Save a plot drawn in a sandbox
#'
#' @param plot An \code{rsandbox_plot} from a result's \code{plots}.
#' @param path Where to write the PNG file.
#' @return \code{path}, invisibly.
#' @export
save_plot <- function(plot, path) {
  stopifnot(inherits(plot, "rsandbox_plot"))
  writeBin(plot$data, path)
  invisible(path)
}
