# One `rsandbox serve --stdio` process and the protocol spoken with it
# (docs/protocol.md in the rsandbox repository): JSON lines in, JSON lines out.
#
# Nothing read from the server is ever evaluated: each line is size-capped and parsed
# with jsonlite::fromJSON; values are data, plots are base64 PNG bytes.

# Longest line accepted from the server (a result carries at most the output limit,
# 16 MiB by default, plus plots and JSON punctuation).
.max_line <- 64 * 1024^2

#' Find the rsandbox command
#'
#' Looked up in this order: \code{getOption("rsandbox.binary")}, the
#' \env{RSANDBOX_BIN} environment variable, the repository's \file{target/release}
#' (and \file{target/debug}) when \env{RSANDBOX_REPO} names a checkout, then the
#' \env{PATH}.
#'
#' @return The path of the \code{rsandbox} executable; an error naming every place
#'   looked at when there is none.
#' @export
rsandbox_binary <- function() {
  candidates <- c(
    option = getOption("rsandbox.binary", ""),
    env = Sys.getenv("RSANDBOX_BIN"),
    release = if (nzchar(Sys.getenv("RSANDBOX_REPO"))) file.path(Sys.getenv("RSANDBOX_REPO"), "target", "release", "rsandbox") else "",
    debug = if (nzchar(Sys.getenv("RSANDBOX_REPO"))) file.path(Sys.getenv("RSANDBOX_REPO"), "target", "debug", "rsandbox") else "",
    path = Sys.which("rsandbox")
  )
  for (p in candidates) {
    if (nzchar(p) && file.exists(p) && file.access(p, 1L) == 0L) return(normalizePath(p))
  }
  stop(rsandbox_condition(
    "rsandbox_setup_error",
    paste0("the rsandbox command was not found: set options(rsandbox.binary = ...), ",
           "or RSANDBOX_BIN, or RSANDBOX_REPO (a checkout with target/release/rsandbox ",
           "after `cargo build --release`), or put rsandbox on the PATH"),
    state_kept = FALSE
  ))
}

Server <- R6::R6Class("rsandbox_server",
  public = list(
    process = NULL,
    # Tool functions by session id, then by name.
    tools = NULL,
    # Output handlers by request id.
    handlers = NULL,
    # Responses that arrived for requests not being waited on yet, by id.
    parked = NULL,
    next_id = 0L,
    buffer = "",
    args = NULL,
    stderr_file = NULL,

    initialize = function(args = character()) {
      self$args <- args
      self$tools <- new.env(parent = emptyenv())
      self$handlers <- new.env(parent = emptyenv())
      self$parked <- new.env(parent = emptyenv())
      self$start()
    },

    start = function() {
      binary <- rsandbox_binary()
      # The server's diagnostics go to a file (a pipe nobody reads would fill up).
      self$stderr_file <- tempfile("rsandbox-server-", fileext = ".log")
      self$process <- processx::process$new(
        binary, c("serve", "--stdio", self$args),
        stdin = "|", stdout = "|", stderr = self$stderr_file, cleanup = TRUE, cleanup_tree = TRUE
      )
      self$buffer <- ""
      invisible(self)
    },

    is_alive = function() !is.null(self$process) && self$process$is_alive(),

    # Why the server is gone, as a condition: what it last said. Exit status 2 is the
    # command's "bad input" (a profile that does not load, an unknown option).
    exited = function() {
      said <- paste(utils::tail(readLines(self$stderr_file, warn = FALSE), 5), collapse = " ")
      status <- if (is.null(self$process)) NA else self$process$get_exit_status()
      class <- if (identical(status, 2L)) "rsandbox_input_error" else "rsandbox_crash"
      rsandbox_condition(class, paste("the rsandbox server exited:", said), state_kept = FALSE)
    },

    close = function() {
      if (!is.null(self$process)) {
        # End of input is the server's signal to finish (it exits within milliseconds);
        # it is killed only if it does not.
        try(close(self$process$get_input_connection()), silent = TRUE)
        if (self$process$is_alive()) {
          self$process$wait(2000)
          if (self$process$is_alive()) self$process$kill_tree()
        }
      }
      self$process <- NULL
      if (!is.null(self$stderr_file)) unlink(self$stderr_file)
      invisible(NULL)
    },

    # Send a request (an `id` is added); returns the id.
    send = function(request, on_output = NULL) {
      if (!self$is_alive()) stop(self$exited())
      self$next_id <- self$next_id + 1L
      id <- self$next_id
      request$id <- id
      if (!is.null(on_output)) assign(as.character(id), on_output, envir = self$handlers)
      line <- jsonlite::toJSON(request, auto_unbox = TRUE, null = "null", digits = NA)
      self$process$write_input(paste0(line, "\n"))
      id
    },

    # Read until the response to `id` arrives (answering tool calls and passing output
    # events on meanwhile); an error after `timeout` seconds.
    wait = function(id, timeout) {
      key <- as.character(id)
      deadline <- Sys.time() + timeout
      on.exit(if (exists(key, envir = self$handlers, inherits = FALSE)) rm(list = key, envir = self$handlers))
      repeat {
        if (exists(key, envir = self$parked, inherits = FALSE)) {
          response <- get(key, envir = self$parked)
          rm(list = key, envir = self$parked)
          return(response)
        }
        left <- as.numeric(difftime(deadline, Sys.time(), units = "secs"))
        if (left <= 0) {
          stop(rsandbox_condition("rsandbox_timeout",
            sprintf("no answer from the rsandbox server within %.1f s", timeout), state_kept = NA))
        }
        line <- self$read_line(left)
        if (is.null(line)) next
        self$dispatch(line)
      }
    },

    request = function(request, timeout, on_output = NULL) {
      self$wait(self$send(request, on_output), timeout)
    },

    # One complete line, or NULL if none arrived within `timeout` seconds.
    read_line = function(timeout) {
      repeat {
        nl <- regexpr("\n", self$buffer, fixed = TRUE)
        if (nl > 0) {
          line <- substr(self$buffer, 1L, nl - 1L)
          self$buffer <- substr(self$buffer, nl + 1L, nchar(self$buffer))
          return(line)
        }
        if (nchar(self$buffer, type = "bytes") > .max_line) {
          self$close()
          stop(rsandbox_condition("rsandbox_crash", "the rsandbox server sent an oversized line", state_kept = FALSE))
        }
        if (!self$is_alive() && !self$process$is_incomplete_output()) stop(self$exited())
        ready <- self$process$poll_io(max(1L, as.integer(timeout * 1000)))
        if (ready[["output"]] == "timeout") return(NULL)
        chunk <- self$process$read_output()
        if (nzchar(chunk)) self$buffer <- paste0(self$buffer, chunk)
      }
    },

    dispatch = function(line) {
      message <- jsonlite::fromJSON(line, simplifyVector = FALSE)
      event <- message$event
      if (identical(event, "tool_call")) return(self$answer_tool(message))
      if (identical(event, "output")) {
        key <- as.character(message$id)
        if (exists(key, envir = self$handlers, inherits = FALSE)) {
          get(key, envir = self$handlers)(message$text, message$stream)
        }
        return(invisible(NULL))
      }
      if (!is.null(message$id)) assign(as.character(message$id), message, envir = self$parked)
      invisible(NULL)
    },

    # A tool call from a sandbox: run the R function here, in the caller's session.
    answer_tool = function(call) {
      session_tools <- if (exists(call$session, envir = self$tools, inherits = FALSE)) get(call$session, envir = self$tools) else list()
      tool <- session_tools[[call$tool]]
      reply <- if (is.null(tool)) {
        list(op = "tool_result", call = call$call, error = paste0("no tool ", call$tool))
      } else {
        args <- lapply(call$args, simplify_json)
        out <- tryCatch(list(value = do.call(tool$fn, args)), error = function(e) list(error = conditionMessage(e)))
        if (!is.null(out$error)) list(op = "tool_result", call = call$call, error = out$error)
        else list(op = "tool_result", call = call$call, value = out$value)
      }
      line <- jsonlite::toJSON(reply, auto_unbox = TRUE, null = "null", digits = NA)
      self$process$write_input(paste0(line, "\n"))
      invisible(NULL)
    }
  )
)

# A value parsed with simplifyVector = FALSE, simplified the way fromJSON would have
# (arrays of scalars become vectors, arrays of records data frames).
simplify_json <- function(x) {
  if (!is.list(x)) return(x)
  jsonlite::fromJSON(jsonlite::toJSON(x, auto_unbox = TRUE, null = "null", digits = NA), simplifyVector = TRUE)
}
