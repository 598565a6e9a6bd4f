#' A persistent sandboxed R session
#'
#' State persists between \code{$execute()} calls. Tools are R functions of this
#' session that the sandboxed code calls by name.
#'
#' \code{$execute()} behaves as \code{\link{rsandbox_eval}()}: the sandbox's output,
#' messages and standard error appear on your console as they happen, its warnings are
#' signalled as warnings when it has finished, and the plain value is returned
#' (invisibly when the sandbox has printed it already). \code{result = TRUE} returns
#' the full result instead (an \code{rsandbox_result}); so does
#' \code{\link{rsandbox_last_result}()} afterwards.
#'
#' An \code{output_handler} takes the output instead of the console (nothing is shown
#' or signalled then). A handler of two arguments, \code{function(text, stream)}, is
#' called with each piece of output as it arrives and its stream (\code{"stdout"},
#' \code{"stderr"}, \code{"message"}, \code{"warning"}); a handler of one argument,
#' \code{function(line)} as securer's, is called once per whole line.
#'
#' Failures are conditions inheriting \code{rsandbox_error} (\code{rsandbox_eval_error},
#' \code{rsandbox_timeout}, \code{rsandbox_limit}, \code{rsandbox_violation},
#' \code{rsandbox_crash}, \code{rsandbox_interrupted}, \code{rsandbox_setup_error},
#' \code{rsandbox_input_error}, \code{rsandbox_bad_input} for a wrong argument,
#' \code{rsandbox_closed} after \code{$close()}), each with \code{state_kept}. If the
#' server behind the session died, \code{$execute()} says so (\code{rsandbox_crash})
#' and \code{$restart()} starts a fresh server and session. Leaving an execute early
#' (an interrupt, \code{invokeRestart("abort")} in a handler) stops the code running in
#' the session, whose state is kept.
#'
#' @param tools A list of \code{\link{sandbox_tool}}s (or securer tools).
#' @param limits \code{\link{sandbox_limits}()}.
#' @param preload Packages to attach in the session before the first execute.
#' @param audit_log A file for JSONL audit records (a server of its own): one JSON
#'   object a line with \code{timestamp}, \code{event} and \code{session_id}
#'   (securer's fields), code cut at 10 000 characters with \code{"... [truncated]"}.
#'   It must be a regular file only you can read (mode 0600) or a new path (created
#'   0600; a missing directory is created); a symlink, a device such as
#'   \file{/dev/null}, or a directory is an \code{rsandbox_bad_input} error.
#' @param profile The policy profile, as for \code{\link{rsandbox_eval}}.
#' @param restore A \code{$snapshot()} of another session to start from (loaded inside
#'   the new sandbox; never read in this R process).
#' @return An R6 object: \code{$execute(code, timeout = 30, output_handler = NULL,
#'   max_tool_calls = 100, echo = TRUE, quiet = FALSE, result = FALSE, globals = NULL,
#'   args = NULL, typed = NULL)} (\code{globals}, \code{args}, \code{typed}: as for
#'   \code{\link{rsandbox_eval}}; globals stay defined in the session)
#'   (\code{echo = FALSE}: visible values are not printed by the sandbox, the last value
#'   comes back visible or not, as \code{eval()}, and is returned visibly when it was
#'   visible; \code{quiet}, \code{result}: as for \code{\link{rsandbox_eval}}),
#'   \code{$interrupt()}, \code{$put_file(path, from)}, \code{$get_file(path, to)},
#'   \code{$list_files()}, \code{$snapshot()}, \code{$restart()}, \code{$is_alive()},
#'   \code{$close()}. \code{print()} shows one line: the session's id, whether it is
#'   alive, its limits and tools.
#' @examples
#' if (rsandbox_available()) {
#'   s <- sandbox_session(limits = sandbox_limits(memory = "512M"))
#'   s
#'   s$execute("x <- 10")
#'   s$execute("x * 2")           # state persists
#'   s$execute("y <- x + k", globals = list(k = 5))
#'   s$execute("y")
#'   s$close()
#' }
#' @export
sandbox_session <- function(tools = list(), limits = sandbox_limits(), preload = character(), audit_log = NULL,
                            restore = NULL, profile = NULL) {
  call <- rlang::current_env()
  Session$new(tools = tools, limits = check_limits(limits), preload = preload, audit_log = audit_log,
              restore = restore, profile = profile, call = call)
}

# Tools as a named list of rsandbox tools; duplicates are an error.
check_tools <- function(tools, call = rlang::caller_env()) {
  if (is.null(tools)) return(list())
  if (inherits(tools, "rsandbox_tool") || (is.list(tools) && is.function(tools$fn))) tools <- list(tools)
  if (!is.list(tools)) bad_input("{.arg tools} must be a list of tools from {.fn sandbox_tool}, not {describe(tools)}.", call = call)
  tools <- lapply(tools, as_tool, call = call)
  names(tools) <- vapply(tools, function(t) t$name, character(1))
  if (anyDuplicated(names(tools))) {
    bad_input("Tool names must be unique; {.val {unique(names(tools)[duplicated(names(tools))])}} is repeated.", call = call)
  }
  tools
}

Session <- R6::R6Class("rsandbox_session",
  public = list(
    id = NULL,
    initialize = function(tools = list(), limits = sandbox_limits(), preload = character(), audit_log = NULL,
                          server = NULL, restore = NULL, profile = NULL, call = NULL) {
      call <- call %||% rlang::caller_env()
      private$tools <- check_tools(tools, call)
      private$limits <- check_limits(limits, call = call)
      if (!is.character(preload) || anyNA(preload) || !all(grepl("^[A-Za-z][A-Za-z0-9.]*$", preload))) {
        bad_input("{.arg preload} must be package names, not {describe(preload)}.", call = call)
      }
      private$preload <- preload
      if (!is.null(restore) && !inherits(restore, "rsandbox_snapshot")) {
        bad_input("{.arg restore} must be a session's {.code $snapshot()}, not {describe(restore)}.", call = call)
      }
      args <- profile_args(profile, call = call)
      audit_log <- check_audit_log(audit_log, call = call)
      if (!is.null(audit_log)) {
        private$own_server <- TRUE
        private$server <- Server$new(c("--audit-log", audit_log, args), call = call)
      } else {
        private$server <- server %||% server_for(args, call = call)
      }
      private$open(restore, call)
    },

    execute = function(code, timeout = 30, output_handler = NULL, max_tool_calls = 100, echo = TRUE, quiet = FALSE,
                       result = FALSE, globals = NULL, args = NULL, typed = NULL) {
      call <- rlang::current_env()
      values <- check_values(code, globals, args, typed, call = call)
      text <- values$code
      timeout <- check_timeout(timeout)
      check_handler(output_handler)
      max_tool_calls <- check_count(max_tool_calls)
      check_flag(echo)
      check_flag(quiet)
      check_flag(result)
      private$check_open(call)
      request <- list(op = "session.execute", session = self$id, code = text, timeout = timeout,
                      max_tool_calls = max_tool_calls)
      if (!echo) request$echo <- FALSE
      if (!is.null(values$globals)) request$globals <- values$globals
      if (values$typed) request$typed <- TRUE
      evaluate(private$server, request, timeout, quiet = quiet, want_result = result, handler = output_handler, echo = echo,
               on_abandon = function() private$stop_running(), call = call)
    },

    interrupt = function() {
      private$check_open(rlang::current_env())
      # Sent without waiting for the running execute: it returns `interrupted`.
      private$server$send(list(op = "session.interrupt", session = self$id))
      invisible(TRUE)
    },

    put_file = function(path, from) {
      call <- rlang::current_env()
      check_path(path, call = call)
      if (!is.character(from) || length(from) != 1L || is.na(from) || !file.exists(from) || dir.exists(from)) {
        bad_input("{.arg from} must be an existing file, not {describe(from)}.", call = call)
      }
      private$check_open(call)
      data <- readBin(from, "raw", file.info(from)$size)
      response <- private$call(list(op = "session.put_file", session = self$id, path = path,
                                    data_base64 = jsonlite::base64_enc(data)), call = call)
      invisible(response$size)
    },

    get_file = function(path, to) {
      call <- rlang::current_env()
      check_path(path, call = call)
      if (!is.character(to) || length(to) != 1L || is.na(to) || !nzchar(to)) {
        bad_input("{.arg to} must be a file path, not {describe(to)}.", call = call)
      }
      private$check_open(call)
      response <- private$call(list(op = "session.get_file", session = self$id, path = path), call = call)
      writeBin(jsonlite::base64_dec(response$data_base64), to)
      invisible(to)
    },

    list_files = function() {
      call <- rlang::current_env()
      private$check_open(call)
      response <- private$call(list(op = "session.list_files", session = self$id), call = call)
      data.frame(path = vapply(response$files, function(f) f$path, character(1)),
                 size = vapply(response$files, function(f) as.numeric(f$size), numeric(1)),
                 stringsAsFactors = FALSE)
    },

    # The session's state as opaque base64: it is only ever read inside a sandbox
    # (sandbox_session(restore = snapshot), in this or another server), never here.
    snapshot = function() {
      call <- rlang::current_env()
      private$check_open(call)
      response <- private$call(list(op = "session.snapshot", session = self$id), call = call)
      structure(response$snapshot, class = "rsandbox_snapshot", not_saved = unlist(response$not_saved))
    },

    # A fresh session in place of this one: after a reset, a crash of the server (a new
    # server is started), or close().
    restart = function() {
      call <- rlang::current_env()
      private$close_remote()
      private$server$ensure_alive(call)
      private$closed <- FALSE
      private$open(NULL, call)
      invisible(self)
    },

    is_alive = function() {
      !private$closed && !is.null(self$id) && private$server$is_alive() && identical(private$generation, private$server$generation)
    },

    close = function() {
      private$close_remote()
      private$closed <- TRUE
      if (private$own_server) private$server$close()
      invisible(NULL)
    },

    format = function(...) {
      state <- if (private$closed) "closed" else if (self$is_alive()) "alive" else "server exited ($restart() to start again)"
      paste0("<rsandbox_session", if (!private$closed && !is.null(self$id)) paste0(" ", self$id), ": ", state,
             "; limits: ", format(private$limits),
             if (length(private$tools)) paste0("; tools: ", paste(names(private$tools), collapse = ", ")), ">")
    },

    print = function(...) {
      cat(self$format(), "\n", sep = "")
      invisible(self)
    }
  ),
  private = list(
    server = NULL, tools = NULL, limits = NULL, preload = NULL, generation = NULL, closed = FALSE, own_server = FALSE,

    open = function(restore, call = NULL) {
      request <- list(op = "session.create", tools = unname(lapply(private$tools, tool_spec)))
      if (length(private$limits)) request$limits <- unclass(private$limits)
      if (!is.null(restore)) request$restore <- unclass(restore)
      response <- private$call(request, call = call)
      self$id <- response$session
      private$generation <- private$server$generation
      assign(self$id, private$tools, envir = private$server$tools)
      for (pkg in private$preload) self$execute(sprintf("library(%s)", pkg), quiet = TRUE)
    },

    # An error unless requests can be sent for this session.
    check_open = function(call) {
      if (private$closed) rsandbox_abort("rsandbox_closed", "this session is closed; `$restart()` starts a fresh one",
                                         state_kept = FALSE, call = call)
      if (is.null(self$id) || !private$server$is_alive() || !identical(private$generation, private$server$generation)) {
        why <- if (!private$server$is_alive()) conditionMessage(private$server$exited()) else "the rsandbox server was restarted"
        rsandbox_abort("rsandbox_crash", paste0("this session is gone (", why, "); `$restart()` starts a fresh session"),
                       state_kept = FALSE, call = call)
      }
    },

    call = function(request, timeout = 60, call = NULL) {
      response <- private$server$request(request, timeout, call = call)
      if (!is.null(response$error)) rlang::cnd_signal(error_response(response, call = call))
      response
    },

    # The caller left an execute early: stop the code that is still running (it keeps
    # the session's state, as an interrupt does) and wait for its answer to be dropped,
    # so that the next execute finds the session idle.
    stop_running = function() {
      if (!self$is_alive()) return(invisible(NULL))
      id <- private$server$send(list(op = "session.interrupt", session = self$id))
      private$server$abandon(id)
      private$server$settle(5)
      invisible(NULL)
    },

    close_remote = function() {
      if (!is.null(self$id) && private$server$is_alive() && identical(private$generation, private$server$generation)) {
        try(private$server$request(list(op = "session.close", session = self$id), 10), silent = TRUE)
      }
      if (!is.null(self$id) && !is.null(private$server$tools) && exists(self$id, envir = private$server$tools, inherits = FALSE) &&
          identical(private$generation, private$server$generation)) {
        rm(list = self$id, envir = private$server$tools)
      }
      self$id <- NULL
    },

    finalize = function() {
      try(private$close_remote(), silent = TRUE)
      if (private$own_server) try(private$server$close(), silent = TRUE)
    }
  )
)

check_path <- function(path, arg = rlang::caller_arg(path), call = rlang::caller_env()) {
  if (!is.character(path) || length(path) != 1L || is.na(path) || !nzchar(path)) {
    bad_input("{.arg {arg}} must be a path in the sandbox's workspace, not {describe(path)}.", call = call)
  }
  path
}

#' A pool of sandboxed sessions
#'
#' @param size Sessions, served concurrently by one server (a whole number, 1 to 64).
#' @param tools,limits,profile As for \code{\link{sandbox_session}}.
#' @return An R6 object: \code{$execute(code, timeout = 30, quiet = FALSE, result =
#'   FALSE)} (a free session, state reset afterwards; as a session's
#'   \code{$execute()}), \code{$execute_all(codes, timeout = 30, result = FALSE)}
#'   (concurrently; a list in order of the values, or full results with \code{result =
#'   TRUE}, or the conditions of failures; nothing is shown on the console),
#'   \code{$status()}, \code{$close()}. \code{print()} shows one line: size, busy
#'   sessions, whether the server is alive, the limits.
#' @examples
#' if (rsandbox_available()) {
#'   p <- sandbox_pool(2)
#'   p
#'   p$execute_all(c("1 + 1", "sqrt(16)"))
#'   p$close()
#' }
#' @export
sandbox_pool <- function(size = 2, tools = list(), limits = sandbox_limits(), profile = NULL) {
  call <- rlang::current_env()
  size <- check_count(size, min = 1)
  if (size > 64) bad_input("{.arg size} must be at most 64 (the server's limit on open sessions), not {size}.")
  Pool$new(size, check_tools(tools), check_limits(limits), profile, call = call)
}

Pool <- R6::R6Class("rsandbox_pool",
  public = list(
    initialize = function(size, tools, limits, profile = NULL, call = NULL) {
      private$server <- Server$new(profile_args(profile, call = call), call = call)
      private$tools <- tools
      private$limits <- limits
      private$sessions <- lapply(seq_len(size), function(i) Session$new(tools, limits, server = private$server, call = call))
      private$busy <- rep(FALSE, size)
    },

    execute = function(code, timeout = 30, quiet = FALSE, result = FALSE) {
      call <- rlang::current_env()
      private$check_open(call)
      i <- which(!private$busy)[1]
      if (is.na(i)) rsandbox_abort(c("rsandbox_busy"), "every session of the pool is busy", state_kept = NA, call = call)
      session <- private$sessions[[i]]
      if (!session$is_alive()) session$restart()
      private$busy[i] <- TRUE
      on.exit({
        private$busy[i] <- FALSE
        try(session$restart(), silent = TRUE)
      })
      session$execute(code, timeout, quiet = quiet, result = result)
    },

    # Several codes at once, one per free session, evaluated concurrently by the
    # server; results (or conditions) in order.
    execute_all = function(codes, timeout = 30, result = FALSE) {
      call <- rlang::current_env()
      if (!(is.character(codes) && !anyNA(codes)) && !is.list(codes)) {
        bad_input("{.arg codes} must be a character vector or a list of code, not {describe(codes)}.")
      }
      texts <- vapply(seq_along(codes), function(k) check_code(codes[[k]], arg = "codes", call = call), character(1))
      timeout <- check_timeout(timeout)
      check_flag(result)
      private$check_open(call)
      n <- length(private$sessions)
      results <- vector("list", length(texts))
      # Left early: the answers still to come are dropped.
      ids <- numeric()
      waited <- 0L
      on.exit(for (id in ids[-seq_len(waited)]) private$server$abandon(id))
      for (start in seq(1, length(texts), by = n)) {
        batch <- start:min(length(texts), start + n - 1)
        for (k in seq_along(batch)) if (!private$sessions[[k]]$is_alive()) private$sessions[[k]]$restart()
        ids <- vapply(seq_along(batch), function(k) {
          private$server$send(list(op = "session.execute", session = private$sessions[[k]]$id,
                                   code = texts[[batch[k]]], timeout = timeout), call = call)
        }, numeric(1))
        waited <- 0L
        for (k in seq_along(batch)) {
          response <- private$server$wait(ids[k], timeout + 30, call = call)
          waited <- k
          results[[batch[k]]] <- if (!is.null(response$error)) error_response(response, call = call) else {
            r <- response$result
            condition_for(r, call = call) %||% (if (result) as_result(r) else as_result(r)$value)
          }
        }
        for (k in seq_along(batch)) private$sessions[[k]]$restart()
      }
      results
    },

    status = function() list(size = length(private$sessions), busy = sum(private$busy), alive = private$server$is_alive(),
                             closed = private$closed),

    format = function(...) {
      if (private$closed) return("<rsandbox_pool: closed>")
      sprintf("<rsandbox_pool: %d sessions, %d busy; server %s; limits: %s>", length(private$sessions), sum(private$busy),
              if (private$server$is_alive()) "alive" else "exited", format(private$limits))
    },

    print = function(...) {
      cat(self$format(), "\n", sep = "")
      invisible(self)
    },

    close = function() {
      for (s in private$sessions) try(s$close(), silent = TRUE)
      private$server$close()
      private$closed <- TRUE
      invisible(NULL)
    }
  ),
  private = list(server = NULL, tools = NULL, limits = NULL, sessions = NULL, busy = NULL, closed = FALSE,
                 check_open = function(call) {
                   if (private$closed) rsandbox_abort("rsandbox_closed", "this pool is closed", state_kept = FALSE, call = call)
                   if (!private$server$is_alive()) private$server$ensure_alive(call)
                 },
                 finalize = function() try(self$close(), silent = TRUE))
)

#' An ellmer tool that runs R code in a session
#'
#' @param session A \code{\link{sandbox_session}}.
#' @return An ellmer tool; an error when the ellmer package is not installed.
#' @examples
#' if (rsandbox_available() && requireNamespace("ellmer", quietly = TRUE)) {
#'   s <- sandbox_session()
#'   tool <- as_ellmer_tool(s)
#'   s$close()
#' }
#' @export
as_ellmer_tool <- function(session) {
  if (!requireNamespace("ellmer", quietly = TRUE)) {
    rsandbox_abort("rsandbox_setup_error", "as_ellmer_tool() needs the ellmer package", state_kept = NA,
                   call = rlang::current_env())
  }
  run <- function(code) {
    out <- tryCatch(session$execute(code, quiet = TRUE, result = TRUE), rsandbox_error = function(e) conditionMessage(e))
    if (is.character(out)) out else paste(c(out$stdout, out$messages, if (length(out$warnings)) paste("Warning:", out$warnings)),
                                          collapse = "")
  }
  ellmer_tool <- get("tool", envir = asNamespace("ellmer"))
  ellmer_tool(run, "Run R code in a persistent, isolated R session and return what the console shows.",
              code = get("type_string", envir = asNamespace("ellmer"))("R code"))
}
