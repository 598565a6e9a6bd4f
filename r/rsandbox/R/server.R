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
#' @examples
#' if (rsandbox_available()) rsandbox_binary()
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
  rsandbox_abort(
    "rsandbox_setup_error",
    paste0("the rsandbox command was not found: set options(rsandbox.binary = ...), ",
           "or RSANDBOX_BIN, or RSANDBOX_REPO (a checkout with target/release/rsandbox ",
           "after `cargo build --release`), or put rsandbox on the PATH"),
    state_kept = FALSE
  )
}

#' Is the sandbox available here?
#'
#' \code{TRUE} when this is Linux and the \code{rsandbox} command is found (see
#' \code{\link{rsandbox_binary}}): what examples and tests check before they run code.
#' Whether the kernel gives every layer is known only when a server starts (it refuses
#' to start without them, with an \code{rsandbox_setup_error} that says which).
#'
#' @return \code{TRUE} or \code{FALSE}.
#' @examples
#' rsandbox_available()
#' if (rsandbox_available()) rsandbox_eval("1 + 1")
#' @export
rsandbox_available <- function() {
  identical(Sys.info()[["sysname"]], "Linux") &&
    !inherits(tryCatch(rsandbox_binary(), error = function(e) e), "error")
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
    # Requests whose caller left before the answer (their answers are dropped), by id.
    abandoned = NULL,
    next_id = 0L,
    buffer = "",
    args = NULL,
    stderr_file = NULL,
    # How many server processes this object has started: a session belongs to one of
    # them, and its id means nothing to the next (ids start again at 1).
    generation = 0L,

    initialize = function(args = character(), call = NULL) {
      self$args <- args
      self$start(call)
    },

    start = function(call = NULL) {
      binary <- rsandbox_binary()
      self$tools <- new.env(parent = emptyenv())
      self$handlers <- new.env(parent = emptyenv())
      self$parked <- new.env(parent = emptyenv())
      self$abandoned <- new.env(parent = emptyenv())
      # The server's diagnostics go to a file (a pipe nobody reads would fill up).
      self$stderr_file <- tempfile("rsandbox-server-", fileext = ".log")
      # `cleanup = TRUE`: a server whose object is collected is killed by its own pid
      # (processx checks first that it is still its unreaped child). Not `cleanup_tree`:
      # that kills every process carrying the object's marker, and processx draws the
      # markers from R's random numbers, so after the same `set.seed()` (R CMD check sets
      # one before each example) two servers started in the same second had one marker,
      # and collecting the first one's object killed the second server. The server's own
      # processes need no tree kill: its zygote ends its sandboxes when the server is gone.
      self$process <- tryCatch(
        preserving_seed(processx::process$new(binary, c("serve", "--stdio", self$args),
          stdin = "|", stdout = "|", stderr = self$stderr_file, cleanup = TRUE)),
        error = function(e) {
          rsandbox_abort("rsandbox_setup_error", paste0("the rsandbox server could not be started (", binary, ")"),
                         state_kept = FALSE, call = call, parent = e)
        })
      self$generation <- self$generation + 1L
      self$buffer <- ""
      invisible(self)
    },

    # A live server: this one, or a fresh process in its place (a new generation) if it
    # died.
    ensure_alive = function(call = NULL) {
      if (!self$is_alive()) {
        self$close()
        self$start(call)
      }
      invisible(self)
    },

    is_alive = function() !is.null(self$process) && self$process$is_alive(),

    # Why the server is gone, as a condition: its exit status and what it last said.
    # Exit status 2 is the command's "bad input" (a profile that does not load, an
    # unknown option).
    exited = function(call = NULL) {
      status <- NA_integer_
      if (!is.null(self$process)) {
        if (self$process$is_alive()) self$process$wait(1000)
        if (!self$process$is_alive()) status <- self$process$get_exit_status()
      }
      said <- if (!is.null(self$stderr_file) && file.exists(self$stderr_file)) {
        utils::tail(readLines(self$stderr_file, warn = FALSE), 5)
      } else character()
      # clap's advice ("For more information, try '--help'.") is not for R's users.
      said <- sub("^(rsandbox|error): ", "", said[nzchar(said) & !grepl("^For more information", said)])
      how <- if (is.null(status) || is.na(status)) "is not running"
        else if (status < 0) sprintf("was killed by signal %d", -status)
        else sprintf("exited with status %d", status)
      class <- if (identical(status, 2L)) "rsandbox_input_error" else "rsandbox_crash"
      rsandbox_condition(class, paste0("the rsandbox server ", how, if (length(said)) paste0(": ", paste(said, collapse = " ")) else ""),
                         state_kept = FALSE, status = status, call = call)
    },

    close = function() {
      if (!is.null(self$process)) {
        # End of input is the server's signal to finish (it exits within milliseconds);
        # it is killed only if it does not.
        try(close(self$process$get_input_connection()), silent = TRUE)
        if (self$process$is_alive()) {
          self$process$wait(2000)
          if (self$process$is_alive()) self$process$kill()
        }
      }
      self$process <- NULL
      if (!is.null(self$stderr_file)) unlink(self$stderr_file)
      invisible(NULL)
    },

    # Write one JSON line; a server that is gone is an `exited()` condition.
    write_line = function(message, call = NULL) {
      if (!self$is_alive()) rlang::cnd_signal(self$exited(call))
      # json_verbatim: `globals` arrive already written as JSON (values.R, class "json").
      line <- jsonlite::toJSON(message, auto_unbox = TRUE, null = "null", digits = NA, json_verbatim = TRUE)
      ok <- tryCatch({
        # write_input() writes what the pipe takes now and returns the rest: a request
        # larger than the pipe's buffer goes in several writes, each waiting for the
        # server to read (bounded: a server that stops reading is an error).
        rest <- charToRaw(paste0(line, "\n"))
        deadline <- Sys.time() + 60
        repeat {
          rest <- self$process$write_input(rest)
          if (!length(rest)) break
          if (!self$is_alive() || Sys.time() > deadline) stop("the rsandbox server stopped reading its input")
          Sys.sleep(0.002)
        }
        TRUE
      }, error = function(e) e)
      if (!isTRUE(ok)) {
        if (self$is_alive()) self$process$wait(1000)
        if (!self$is_alive()) rlang::cnd_signal(self$exited(call))
        rsandbox_abort("rsandbox_crash", "could not send a request to the rsandbox server", state_kept = NA,
                       call = call, parent = ok)
      }
      invisible(NULL)
    },

    # Send a request (an `id` is added); returns the id.
    send = function(request, on_output = NULL, call = NULL) {
      self$next_id <- self$next_id + 1L
      id <- self$next_id
      request$id <- id
      if (!is.null(on_output)) assign(as.character(id), on_output, envir = self$handlers)
      self$write_line(request, call)
      id
    },

    # The caller of request `id` is gone: its answer, now or later, is dropped.
    abandon = function(id) {
      key <- as.character(id)
      if (exists(key, envir = self$handlers, inherits = FALSE)) rm(list = key, envir = self$handlers)
      if (exists(key, envir = self$parked, inherits = FALSE)) rm(list = key, envir = self$parked)
      else assign(key, TRUE, envir = self$abandoned)
      invisible(NULL)
    },

    # Read for up to `timeout` seconds until every abandoned request has been answered
    # (and its answer dropped).
    settle = function(timeout) {
      deadline <- Sys.time() + timeout
      while (length(ls(self$abandoned)) && self$is_alive()) {
        left <- as.numeric(difftime(deadline, Sys.time(), units = "secs"))
        if (left <= 0) break
        line <- self$read_line(left)
        if (!is.null(line)) self$dispatch(line)
      }
      invisible(NULL)
    },

    # Read until the response to `id` arrives (answering tool calls and passing output
    # events on meanwhile); an error after `timeout` seconds.
    wait = function(id, timeout, call = NULL) {
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
          rsandbox_abort("rsandbox_timeout", sprintf("no answer from the rsandbox server within %.1f s", timeout),
                         state_kept = NA, call = call)
        }
        line <- self$read_line(left, call)
        if (is.null(line)) next
        self$dispatch(line, call)
      }
    },

    request = function(request, timeout, on_output = NULL, call = NULL) {
      self$wait(self$send(request, on_output, call), timeout, call)
    },

    # One complete line, or NULL if none arrived within `timeout` seconds.
    read_line = function(timeout, call = NULL) {
      repeat {
        nl <- regexpr("\n", self$buffer, fixed = TRUE)
        if (nl > 0) {
          line <- substr(self$buffer, 1L, nl - 1L)
          self$buffer <- substr(self$buffer, nl + 1L, nchar(self$buffer))
          return(line)
        }
        if (nchar(self$buffer, type = "bytes") > .max_line) {
          self$close()
          rsandbox_abort("rsandbox_crash", "the rsandbox server sent an oversized line", state_kept = FALSE, call = call)
        }
        if (is.null(self$process) || (!self$process$is_alive() && !self$process$is_incomplete_output())) {
          rlang::cnd_signal(self$exited(call))
        }
        ready <- self$process$poll_io(max(1L, as.integer(timeout * 1000)))
        if (ready[["output"]] == "timeout") return(NULL)
        chunk <- self$process$read_output()
        if (nzchar(chunk)) self$buffer <- paste0(self$buffer, chunk)
      }
    },

    dispatch = function(line, call = NULL) {
      message <- tryCatch(jsonlite::fromJSON(line, simplifyVector = FALSE), error = function(e) {
        rsandbox_abort("rsandbox_crash", "the rsandbox server sent a line that is not JSON", state_kept = NA,
                       call = call, parent = e)
      })
      event <- message$event
      if (identical(event, "tool_call")) return(self$answer_tool(message, call))
      if (identical(event, "output")) {
        key <- as.character(message$id)
        if (exists(key, envir = self$handlers, inherits = FALSE)) {
          get(key, envir = self$handlers)(message$text, message$stream)
        }
        return(invisible(NULL))
      }
      if (!is.null(message$id)) {
        key <- as.character(message$id)
        if (exists(key, envir = self$abandoned, inherits = FALSE)) rm(list = key, envir = self$abandoned)
        else assign(key, message, envir = self$parked)
      }
      invisible(NULL)
    },

    # A tool call from a sandbox: run the R function here, in the caller's session.
    answer_tool = function(call_event, call = NULL) {
      session_tools <- if (exists(call_event$session, envir = self$tools, inherits = FALSE)) get(call_event$session, envir = self$tools) else list()
      tool <- session_tools[[call_event$tool]]
      reply <- if (is.null(tool)) {
        list(op = "tool_result", call = call_event$call, error = paste0("no tool ", call_event$tool))
      } else {
        args <- lapply(call_event$args, simplify_json)
        out <- tryCatch(list(value = do.call(tool$fn, args)), error = function(e) list(error = conditionMessage(e)))
        if (!is.null(out$error)) list(op = "tool_result", call = call_event$call, error = out$error)
        else list(op = "tool_result", call = call_event$call, value = out$value)
      }
      # A value JSON cannot carry (an environment, a function) is the tool's error.
      if (is.null(reply$error) && inherits(tryCatch(jsonlite::toJSON(reply, auto_unbox = TRUE, null = "null", digits = NA),
                                                    error = function(e) e), "error")) {
        reply <- list(op = "tool_result", call = call_event$call,
                      error = paste0("tool ", call_event$tool, " returned a value that cannot be sent as JSON"))
      }
      self$write_line(reply, call)
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

# Evaluate `expr` with the caller's random-number state kept: processx draws each new
# process's id from R's random numbers, and starting a sandbox must not move the
# caller's stream (`set.seed(1); x <- runif(1)` gives the same with or without one).
preserving_seed <- function(expr) {
  env <- globalenv()
  had <- exists(".Random.seed", envir = env, inherits = FALSE)
  seed <- if (had) get(".Random.seed", envir = env, inherits = FALSE)
  on.exit(if (had) {
    assign(".Random.seed", seed, envir = env)
  } else if (exists(".Random.seed", envir = env, inherits = FALSE)) {
    rm(".Random.seed", envir = env)
  })
  expr
}
