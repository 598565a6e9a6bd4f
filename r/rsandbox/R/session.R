#' A persistent sandboxed R session
#'
#' State persists between \code{$execute()} calls. Tools are R functions of this
#' session that the sandboxed code calls by name. Results: the value, converted from
#' JSON (numbers, strings, logicals, \code{NA}, lists, data frames), with attributes
#' \code{stdout}, \code{messages}, \code{warnings}, \code{plots}, \code{usage};
#' \code{print()} shows what a console would have shown. Failures are conditions
#' inheriting \code{rsandbox_error} (\code{rsandbox_eval_error}, \code{rsandbox_timeout},
#' \code{rsandbox_limit}, \code{rsandbox_violation}, \code{rsandbox_crash},
#' \code{rsandbox_interrupted}, \code{rsandbox_setup_error}), each with
#' \code{state_kept}.
#'
#' @param tools A list of \code{\link{sandbox_tool}}s (or securer tools).
#' @param limits \code{\link{sandbox_limits}()}.
#' @param preload Packages to attach in the session before the first execute.
#' @param audit_log A file for JSONL audit records (a server of its own).
#' @param profile The policy profile, as for \code{\link{rsandbox_eval}}.
#' @param restore A \code{$snapshot()} of another session to start from (loaded inside
#'   the new sandbox; never read in this R process).
#' @return An R6 object: \code{$execute(code, timeout = 30, output_handler = NULL,
#'   max_tool_calls = 100, echo = TRUE)} (\code{echo = FALSE}: visible values are not
#'   printed, and the last value comes back visible or not, as \code{eval()}), \code{$interrupt()}, \code{$put_file(path, from)},
#'   \code{$get_file(path, to)}, \code{$list_files()}, \code{$snapshot()},
#'   \code{$restart()}, \code{$is_alive()}, \code{$close()}.
#' @export
sandbox_session <- function(tools = list(), limits = sandbox_limits(), preload = character(), audit_log = NULL,
                            restore = NULL, profile = NULL) {
  Session$new(tools = tools, limits = limits, preload = preload, audit_log = audit_log, restore = restore,
              profile = profile)
}

Session <- R6::R6Class("rsandbox_session",
  public = list(
    id = NULL,
    initialize = function(tools = list(), limits = sandbox_limits(), preload = character(), audit_log = NULL,
                          server = NULL, restore = NULL, profile = NULL) {
      private$tools <- lapply(tools, as_tool)
      names(private$tools) <- vapply(private$tools, function(t) t$name, character(1))
      private$limits <- limits
      private$preload <- preload
      private$server <- server %||% if (is.null(audit_log)) server_for(profile_args(profile))
        else Server$new(c("--audit-log", audit_log, profile_args(profile)))
      private$open(restore)
    },

    execute = function(code, timeout = 30, output_handler = NULL, max_tool_calls = 100, echo = TRUE) {
      request <- list(op = "session.execute", session = self$id, code = code_text(code),
                      timeout = timeout, max_tool_calls = max_tool_calls)
      if (!isTRUE(echo)) request$echo <- FALSE
      if (!is.null(output_handler)) request$stream <- TRUE
      response <- private$server$request(request, timeout + 30, on_output = output_handler)
      value_or_condition(response)
    },

    interrupt = function() {
      # Sent without waiting for the running execute: it returns `interrupted`.
      private$server$send(list(op = "session.interrupt", session = self$id))
      invisible(TRUE)
    },

    put_file = function(path, from) {
      data <- readBin(from, "raw", file.info(from)$size)
      response <- private$call(list(op = "session.put_file", session = self$id, path = path,
                                    data_base64 = jsonlite::base64_enc(data)))
      invisible(response$size)
    },

    get_file = function(path, to) {
      response <- private$call(list(op = "session.get_file", session = self$id, path = path))
      writeBin(jsonlite::base64_dec(response$data_base64), to)
      invisible(to)
    },

    list_files = function() {
      response <- private$call(list(op = "session.list_files", session = self$id))
      data.frame(path = vapply(response$files, function(f) f$path, character(1)),
                 size = vapply(response$files, function(f) as.numeric(f$size), numeric(1)),
                 stringsAsFactors = FALSE)
    },

    # The session's state as opaque base64: it is only ever read inside a sandbox
    # (sandbox_session(...)$restore_from(snapshot) or another server), never here.
    snapshot = function() {
      response <- private$call(list(op = "session.snapshot", session = self$id))
      structure(response$snapshot, class = "rsandbox_snapshot", not_saved = unlist(response$not_saved))
    },

    restart = function() {
      private$close_remote()
      private$open(NULL)
      invisible(self)
    },

    is_alive = function() !is.null(self$id) && private$server$is_alive(),

    close = function() {
      private$close_remote()
      invisible(NULL)
    }
  ),
  private = list(
    server = NULL, tools = NULL, limits = NULL, preload = NULL,

    open = function(restore) {
      request <- list(op = "session.create", tools = unname(lapply(private$tools, tool_spec)))
      if (length(private$limits)) request$limits <- unclass(private$limits)
      if (!is.null(restore)) request$restore <- unclass(restore)
      response <- private$call(request)
      self$id <- response$session
      assign(self$id, private$tools, envir = private$server$tools)
      for (pkg in private$preload) self$execute(sprintf("library(%s)", pkg))
    },

    call = function(request, timeout = 60) {
      response <- private$server$request(request, timeout)
      if (!is.null(response$error)) stop(error_response(response))
      response
    },

    close_remote = function() {
      if (!is.null(self$id) && private$server$is_alive()) {
        try(private$server$request(list(op = "session.close", session = self$id), 10), silent = TRUE)
        if (exists(self$id, envir = private$server$tools, inherits = FALSE)) rm(list = self$id, envir = private$server$tools)
      }
      self$id <- NULL
    },

    finalize = function() {
      try(private$close_remote(), silent = TRUE)
    }
  )
)

#' A pool of sandboxed sessions
#'
#' @param size Sessions, served concurrently by one server.
#' @param tools,limits,profile As for \code{\link{sandbox_session}}.
#' @return An R6 object: \code{$execute(code, timeout = 30)} (a free session, state
#'   reset afterwards), \code{$execute_all(codes, timeout)} (concurrently),
#'   \code{$status()}, \code{$close()}.
#' @export
sandbox_pool <- function(size = 2, tools = list(), limits = sandbox_limits(), profile = NULL) {
  Pool$new(size, tools, limits, profile)
}

Pool <- R6::R6Class("rsandbox_pool",
  public = list(
    initialize = function(size, tools, limits, profile = NULL) {
      private$server <- Server$new(profile_args(profile))
      private$tools <- tools
      private$limits <- limits
      private$sessions <- lapply(seq_len(size), function(i) Session$new(tools, limits, server = private$server))
      private$busy <- rep(FALSE, size)
    },

    execute = function(code, timeout = 30) {
      i <- which(!private$busy)[1]
      if (is.na(i)) stop(rsandbox_condition("rsandbox_busy", "every session of the pool is busy", state_kept = NA))
      private$busy[i] <- TRUE
      on.exit({
        private$busy[i] <- FALSE
        private$sessions[[i]]$restart()
      })
      private$sessions[[i]]$execute(code, timeout)
    },

    # Several codes at once, one per free session, evaluated concurrently by the
    # server; results (or conditions) in order.
    execute_all = function(codes, timeout = 30) {
      n <- length(private$sessions)
      results <- vector("list", length(codes))
      for (start in seq(1, length(codes), by = n)) {
        batch <- start:min(length(codes), start + n - 1)
        ids <- vapply(seq_along(batch), function(k) {
          private$server$send(list(op = "session.execute", session = private$sessions[[k]]$id,
                                   code = code_text(codes[[batch[k]]]), timeout = timeout))
        }, numeric(1))
        for (k in seq_along(batch)) {
          response <- private$server$wait(ids[k], timeout + 30)
          results[[batch[k]]] <- tryCatch(value_or_condition(response), rsandbox_error = function(e) e)
        }
        for (k in seq_along(batch)) private$sessions[[k]]$restart()
      }
      results
    },

    status = function() list(size = length(private$sessions), busy = sum(private$busy), alive = private$server$is_alive()),

    close = function() {
      for (s in private$sessions) s$close()
      private$server$close()
      invisible(NULL)
    }
  ),
  private = list(server = NULL, tools = NULL, limits = NULL, sessions = NULL, busy = NULL,
                 finalize = function() try(self$close(), silent = TRUE))
)

#' An ellmer tool that runs R code in a session
#'
#' @param session A \code{\link{sandbox_session}}.
#' @return An ellmer tool; an error when the ellmer package is not installed.
#' @export
as_ellmer_tool <- function(session) {
  if (!requireNamespace("ellmer", quietly = TRUE)) {
    stop(rsandbox_condition("rsandbox_setup_error", "as_ellmer_tool() needs the ellmer package", state_kept = NA))
  }
  run <- function(code) {
    out <- tryCatch(session$execute(code), rsandbox_error = function(e) conditionMessage(e))
    if (is.character(out) && !inherits(out, "rsandbox_result")) out else paste(attr(out, "stdout"), collapse = "")
  }
  ellmer_tool <- get("tool", envir = asNamespace("ellmer"))
  ellmer_tool(run, "Run R code in a persistent, isolated R session and return what the console shows.",
              code = get("type_string", envir = asNamespace("ellmer"))("R code"))
}
