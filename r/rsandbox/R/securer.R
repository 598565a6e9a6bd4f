# securer's API on rsandbox: the same names, arguments and behaviour, over the same
# client as sandbox_session(). Attached on demand (use_securer_api()) as its own search
# path entry, so nothing is masked unless asked for and securer itself can stay
# installed. Where securer's behaviour is a bug, this layer does the right thing; the
# vignette "Coming from securer" lists each difference.

#' Use securer's API on rsandbox
#'
#' Attaches an environment named \code{"rsandbox:securer"} holding securer's exported
#' names, each running on rsandbox: \code{SecureSession}, \code{SecureSessionPool},
#' \code{securer_tool}, \code{execute_r}, \code{with_secure_session},
#' \code{validate_code}, \code{default_limits}, \code{as_ellmer_tool},
#' \code{securer_as_ellmer_tool}, \code{securer_tool_class}. Replace
#' \code{library(securer)} with \code{library(rsandbox); use_securer_api()}.
#'
#' Differences from securer (all deliberate): \code{sandbox = FALSE} still runs in the
#' sandbox (there is no unsandboxed mode; a warning says so once); limits rsandbox
#' cannot apply are refused instead of ignored; a timeout interrupts the code and keeps
#' the session's state when R yields; after the tool-call cap the session is reset, not
#' left busy. See \code{vignette("coming-from-securer", package = "rsandbox")}.
#'
#' @param pos Where on the search path (as for \code{attach()}).
#' @return The attached environment, invisibly.
#' @examples
#' if (rsandbox_available()) {
#'   use_securer_api()
#'   session <- SecureSession$new(tools = list(
#'     securer_tool("add", "Add two numbers", function(a, b) a + b, args = list(a = "numeric", b = "numeric"))
#'   ))
#'   session$execute("add(2, 3)")
#'   session$close()
#'   detach("rsandbox:securer")
#' }
#' @export
use_securer_api <- function(pos = 2L) {
  if ("rsandbox:securer" %in% search()) detach("rsandbox:securer", character.only = TRUE)
  # Attaching is the point: securer's users call SecureSession$new() unqualified.
  attach(securer_api(), pos = pos, name = "rsandbox:securer", warn.conflicts = FALSE)
  invisible(as.environment("rsandbox:securer"))
}

#' securer's API as an environment
#'
#' What \code{\link{use_securer_api}()} attaches, for use without touching the search
#' path: \code{api <- securer_api(); api$execute_r("1 + 1")}.
#'
#' @return An environment.
#' @export
securer_api <- function() {
  api <- new.env(parent = emptyenv())
  api$SecureSession <- SecureSession
  api$SecureSessionPool <- SecureSessionPool
  api$securer_tool <- securer_tool
  api$securer_tool_class <- securer_tool_class
  api$execute_r <- execute_r
  api$with_secure_session <- with_secure_session
  api$validate_code <- validate_code
  api$default_limits <- default_limits
  api$as_ellmer_tool <- securer_ellmer_tool
  api$securer_as_ellmer_tool <- securer_ellmer_tool
  api
}

# --- tools --------------------------------------------------------------------------

# securer's tool objects are S7 objects read with `@`; an S4 class gives the same
# reading (tool@name) without S7.
securer_tool_class <- methods::setClass("securer_tool",
  representation(name = "character", description = "character", fn = "function", args = "list"))

is_r_name <- function(x) grepl("^[A-Za-z.][A-Za-z0-9_.]*$", x)

securer_tool <- function(name, description, fn, args = list()) {
  if (!is.character(name) || length(name) != 1L || !nzchar(name)) securer_stop("`name` must be a non-empty string")
  if (!is.character(description)) securer_stop("`description` must be a character string")
  if (!is.function(fn)) securer_stop("`fn` must be a function")
  if (!is.list(args)) securer_stop("`args` must be a list")
  if (!is_r_name(name)) securer_stop(sprintf("Tool name must be a valid R identifier, not \"%s\"", name))
  bad <- names(args)[!is_r_name(names(args))]
  if (length(bad)) securer_stop(sprintf("Argument names must be valid R identifiers: %s", paste(bad, collapse = ", ")))
  securer_tool_class(name = name, description = description, fn = fn, args = args)
}

# Tools as securer accepts them (securer_tool objects, or a named list of functions,
# deprecated there and here) as rsandbox tools.
securer_tools <- function(tools) {
  if (length(tools) == 0) return(list())
  if (is.list(tools) && !is.null(names(tools)) && all(vapply(tools, is.function, logical(1)))) {
    .Deprecated(msg = "Passing tools as a named list of functions is deprecated. Use securer_tool() objects instead.")
    bad <- names(tools)[!is_r_name(names(tools))]
    if (length(bad)) securer_stop(sprintf("Legacy tool names must be valid R identifiers: %s", paste(bad, collapse = ", ")))
    return(unname(Map(function(name, fn) sandbox_tool(name, fn), names(tools), tools)))
  }
  for (tool in tools) {
    if (!methods::is(tool, "securer_tool")) securer_stop("Each tool must be created with securer_tool().")
  }
  names <- vapply(tools, function(t) t@name, character(1))
  if (anyDuplicated(names)) securer_stop(sprintf("Duplicate tool names: %s", paste(unique(names[duplicated(names)]), collapse = ", ")))
  # An argument without a type (NULL) takes anything.
  lapply(tools, function(t) sandbox_tool(t@name, t@fn, t@description, lapply(t@args, function(a) if (is.null(a)) "any" else map_type(a))))
}

# --- limits -------------------------------------------------------------------------

default_limits <- function() {
  list(cpu = 60, memory = 512 * 1024^2, fsize = 50 * 1024^2, nproc = 50, nofile = 256)
}

# securer's limits (bytes and counts) as rsandbox's. A limit rsandbox cannot apply is
# an error: securer ignored unknown names silently, so a typo meant no limit.
securer_limits <- function(limits) {
  if (is.null(limits) || length(limits) == 0) return(sandbox_limits())
  if (!is.list(limits) || is.null(names(limits))) securer_stop("`limits` must be a named list")
  known <- c("cpu", "memory", "fsize", "nproc", "nofile")
  unknown <- setdiff(names(limits), known)
  if ("stack" %in% unknown) {
    securer_stop("rsandbox does not apply a `stack` limit (the memory limit covers the stack); remove it")
  }
  if (length(unknown)) securer_stop(sprintf("Unknown limit(s): %s (known: %s)", paste(unknown, collapse = ", "), paste(known, collapse = ", ")))
  for (n in names(limits)) {
    v <- limits[[n]]
    if (!is.numeric(v) || length(v) != 1L || is.na(v) || v <= 0) securer_stop(sprintf("limit `%s` must be a single positive number", n))
  }
  sandbox_limits(memory = limits$memory, cpu = limits$cpu, fsize = limits$fsize, nproc = limits$nproc, nofile = limits$nofile)
}

warn_no_unsandboxed_mode <- function() {
  if (isTRUE(.state$warned_sandbox_false)) return(invisible())
  .state$warned_sandbox_false <- TRUE
  warning("rsandbox has no unsandboxed mode: `sandbox = FALSE` still runs the code in the sandbox", call. = FALSE)
}

# --- errors -------------------------------------------------------------------------

# securer's error messages, as rsandbox conditions: a wrong argument is
# `rsandbox_bad_input`; `class` says otherwise (`rsandbox_closed`, `rsandbox_busy`).
securer_stop <- function(message, class = c("rsandbox_bad_input", "rsandbox_input_error")) {
  rsandbox_abort(class, message, state_kept = NA)
}

sanitize_error_message <- function(msg, max_length = 500L) {
  if (!is.character(msg) || length(msg) == 0) return("Unknown error")
  msg <- msg[[1]]
  # What follows a trace header is internals.
  msg <- sub("(?s)(Traceback|Call stack|Stack trace):?\\s*\\n.*", "", msg, perl = TRUE)
  # Absolute paths, process ids and addresses say where and what the host is.
  msg <- gsub("(?<![A-Za-z0-9_.])/(?:[^ '\",:;)}\n]+/)*[^ '\",:;)}\n]*", "[path]", msg, perl = TRUE)
  msg <- gsub("\\b(process|pid)\\s*:?\\s*'?\\d+'?", "\\1 [pid]", msg, ignore.case = TRUE, perl = TRUE)
  msg <- gsub("\\b\\d{1,3}(\\.\\d{1,3}){3}(:\\d+)?\\b", "[host]", msg, perl = TRUE)
  if (nchar(msg) > max_length) msg <- paste0(substr(msg, 1, max_length - 3), "...")
  msg
}

# The condition securer raises for an rsandbox failure.
securer_error <- function(e, timeout, max_tool_calls) {
  if (identical(e$result$reset_reason, "tool_call_limit")) {
    msg <- sprintf("Maximum tool calls (%s) exceeded; the session was reset", max_tool_calls)
    return(structure(class = c("securer_error", setdiff(class(e), "rlang_error")), list(message = msg, call = NULL, rsandbox = e)))
  }
  msg <- switch(class(e)[1],
    rsandbox_eval_error = inert(e$r_message %||% conditionMessage(e)),
    rsandbox_timeout = sprintf("Execution timed out after %s", if (identical(timeout, 1)) "1 second" else paste(timeout, "seconds")),
    conditionMessage(e)
  )
  structure(class = c("securer_error", setdiff(class(e), "rlang_error")), list(message = msg, call = NULL, rsandbox = e))
}

# --- SecureSession --------------------------------------------------------------------

#' @rdname use_securer_api
#' @format NULL
#' @usage NULL
SecureSession <- R6::R6Class("SecureSession",
  cloneable = FALSE,
  public = list(
    initialize = function(tools = list(), sandbox = FALSE, limits = NULL, verbose = FALSE, sandbox_strict = FALSE,
                          audit_log = NULL, max_executions = NULL, pre_execute_hook = NULL, sanitize_errors = FALSE) {
      if (!is.null(max_executions) && (!is.numeric(max_executions) || length(max_executions) != 1L || max_executions <= 0)) {
        securer_stop("`max_executions` must be a single positive number")
      }
      if (!is.null(pre_execute_hook) && !is.function(pre_execute_hook)) securer_stop("`pre_execute_hook` must be a function")
      if (!isTRUE(sandbox)) warn_no_unsandboxed_mode()
      private$raw_tools <- tools
      private$verbose <- isTRUE(verbose)
      # Tools run here, on the host: with verbose, each call and result is said.
      private$tools_rs <- lapply(securer_tools(tools), function(tool) {
        fn <- tool$fn
        name <- tool$name
        tool$fn <- function(...) {
          private$log(paste("Tool call:", name))
          value <- fn(...)
          private$log(paste("Tool result:", name))
          value
        }
        tool
      })
      # securer: defaults when sandboxed and no limits given; list() means none of its own.
      private$limits <- securer_limits(if (is.null(limits) && isTRUE(sandbox)) default_limits() else limits)
      private$sandbox <- isTRUE(sandbox)
      private$audit_log <- audit_log
      private$max_executions <- if (is.null(max_executions)) NULL else as.integer(max_executions)
      private$hook <- pre_execute_hook
      private$sanitize <- isTRUE(sanitize_errors)
      private$start()
    },

    execute = function(code, timeout = 30, validate = TRUE, output_handler = NULL, max_tool_calls = NULL,
                       max_code_length = 100000L, max_output_lines = NULL) {
      if (!self$is_alive()) securer_stop("Session is not running.", class = "rsandbox_closed")
      if (private$executing) securer_stop("SecureSession does not support concurrent execute() calls", class = "rsandbox_busy")
      if (!is.null(private$max_executions) && private$count >= private$max_executions) {
        securer_stop(sprintf("Maximum executions (%d) reached for this session.", private$max_executions))
      }
      if (!is.null(private$hook)) {
        verdict <- tryCatch(private$hook(code), error = function(e) securer_stop(paste("pre_execute_hook error:", conditionMessage(e))))
        if (identical(verdict, FALSE)) securer_stop("Execution blocked by pre_execute_hook.")
      }
      if (!is.character(code) || length(code) != 1L) securer_stop("`code` must be a single character string")
      if (!is.null(max_code_length) && nchar(code) > max_code_length) {
        securer_stop(sprintf("Code too long (%d chars, max %d).", nchar(code), as.integer(max_code_length)))
      }
      if (!is.null(output_handler) && !is.function(output_handler)) securer_stop("`output_handler` must be a function or NULL")
      if (isTRUE(validate)) {
        check <- validate_code(code)
        if (!check$valid) securer_stop(paste("Code has a syntax error and was not executed:", check$error))
      }
      private$executing <- TRUE
      private$count <- private$count + 1L
      on.exit(private$executing <- FALSE)
      private$log("Executing code")
      lines <- line_splitter(output_handler)
      calls <- if (is.null(max_tool_calls)) .Machine$integer.max else as.integer(max_tool_calls)
      seconds <- if (is.null(timeout)) 86400 else timeout
      result <- tryCatch(
        private$session$execute(code, timeout = seconds, output_handler = lines$feed, max_tool_calls = calls, echo = FALSE,
                                quiet = TRUE, result = TRUE),
        rsandbox_error = function(e) {
          lines$flush()
          err <- securer_error(e, timeout, max_tool_calls)
          if (private$sanitize) err$message <- sanitize_error_message(err$message)
          private$log(paste("Execution error:", err$message))
          stop(err)
        }
      )
      lines$flush()
      private$log("Execution complete")
      securer_value(result, max_output_lines)
    },

    close = function() {
      if (!is.null(private$session)) {
        private$session$close()
        private$log("Session closed")
      }
      private$session <- NULL
      invisible(self)
    },

    is_alive = function() !is.null(private$session) && private$session$is_alive(),

    restart = function() {
      if (private$executing) securer_stop("Cannot restart while an execution is in progress.", class = "rsandbox_busy")
      private$log("Restarting session")
      self$close()
      private$start()
      invisible(self)
    },

    tools = function() {
      if (length(private$raw_tools) == 0) return(list())
      if (methods::is(private$raw_tools[[1]], "securer_tool")) {
        out <- lapply(private$raw_tools, function(t) list(name = t@name, args = t@args))
        names(out) <- vapply(private$raw_tools, function(t) t@name, character(1))
        return(out)
      }
      lapply(names(private$raw_tools), function(n) list(name = n, args = NULL))
    },

    format = function(...) {
      sprintf("<SecureSession> [%s] sandbox=enabled tools=%d", if (self$is_alive()) "running" else "stopped",
              length(private$tools_rs))
    },

    # As securer (cli): on the message stream.
    print = function(...) {
      message(self$format())
      invisible(self)
    }
  ),
  private = list(
    session = NULL, raw_tools = NULL, tools_rs = NULL, limits = NULL, sandbox = TRUE, verbose = FALSE,
    audit_log = NULL, max_executions = NULL, hook = NULL, sanitize = FALSE, executing = FALSE, count = 0L,

    start = function() {
      private$session <- sandbox_session(tools = private$tools_rs, limits = private$limits, audit_log = private$audit_log)
      private$log("Session started")
    },

    log = function(msg) if (private$verbose) message("[securer] ", msg),

    finalize = function() try(self$close(), silent = TRUE)
  )
)

# Output chunks as whole lines for securer's output_handler.
line_splitter <- function(handler) {
  pending <- ""
  emit <- function(text) {
    parts <- strsplit(paste0(pending, text), "\n", fixed = TRUE)[[1]]
    complete <- endsWith(text, "\n")
    if (!complete && length(parts)) {
      pending <<- parts[length(parts)]
      parts <- parts[-length(parts)]
    } else {
      pending <<- ""
    }
    for (ln in parts) tryCatch(handler(ln), error = function(e) NULL)
  }
  list(
    feed = if (is.null(handler)) NULL else function(text, stream = NULL) emit(text),
    flush = function() {
      if (!is.null(handler) && nzchar(pending)) {
        ln <- pending
        pending <<- ""
        tryCatch(handler(ln), error = function(e) NULL)
      }
    }
  )
}

# securer's result: the plain value, with the output lines (stdout, stderr, messages)
# in attribute "output" when there were any. `result` is the full result.
securer_value <- function(result, max_output_lines = NULL) {
  text <- c(result$stdout, result$stderr)
  out <- unlist(strsplit(paste(text[nzchar(text)], collapse = ""), "\n", fixed = TRUE))
  out <- c(out, sub("\n$", "", result$messages))
  if (!is.null(max_output_lines)) out <- utils::head(out, max_output_lines)
  value <- result$value
  if (length(out) && !is.null(value)) attr(value, "output") <- out
  value
}

# --- the pool and the helpers ---------------------------------------------------------

#' @rdname use_securer_api
#' @format NULL
#' @usage NULL
SecureSessionPool <- R6::R6Class("SecureSessionPool",
  cloneable = FALSE,
  public = list(
    initialize = function(size = 4L, tools = list(), sandbox = TRUE, limits = NULL, verbose = FALSE,
                          reset_between_uses = FALSE) {
      size <- as.integer(size)
      if (is.na(size) || size < 1L) securer_stop("`size` must be at least 1")
      if (size > 100L) securer_stop("`size` must not exceed 100")
      private$args <- list(tools = tools, sandbox = sandbox, limits = limits, verbose = verbose)
      private$reset <- isTRUE(reset_between_uses)
      private$sessions <- lapply(seq_len(size), function(i) do.call(SecureSession$new, private$args))
      private$busy <- rep(FALSE, size)
    },

    execute = function(code, timeout = NULL, acquire_timeout = NULL) {
      if (private$closed) securer_stop("Pool is closed.", class = "rsandbox_closed")
      i <- private$acquire()
      if (is.null(i) && !is.null(acquire_timeout)) {
        deadline <- Sys.time() + acquire_timeout
        while (is.null(i) && Sys.time() < deadline) {
          Sys.sleep(0.05)
          i <- private$acquire()
        }
      }
      if (is.null(i)) securer_stop("All sessions are busy.", class = "rsandbox_busy")
      on.exit(private$release(i), add = TRUE)
      private$sessions[[i]]$execute(code, timeout = timeout %||% 30)
    },

    size = function() length(private$sessions),

    available = function() if (private$closed) 0L else sum(!private$busy),

    status = function() {
      if (private$closed) return(list(total = 0L, busy = 0L, idle = 0L, dead = 0L))
      alive <- vapply(private$sessions, function(s) s$is_alive(), logical(1))
      list(total = length(private$sessions), busy = sum(private$busy), idle = sum(!private$busy & alive), dead = sum(!alive))
    },

    format = function(...) {
      if (private$closed) return("<SecureSessionPool> [closed]")
      sprintf("<SecureSessionPool> size=%d idle=%d busy=%d", length(private$sessions), sum(!private$busy), sum(private$busy))
    },

    print = function(...) {
      message(self$format())
      invisible(self)
    },

    close = function() {
      for (s in private$sessions) try(s$close(), silent = TRUE)
      private$sessions <- list()
      private$busy <- logical(0)
      private$closed <- TRUE
      invisible(self)
    }
  ),
  private = list(
    sessions = list(), busy = logical(0), closed = FALSE, args = NULL, reset = FALSE,

    acquire = function() {
      idle <- which(!private$busy)
      if (length(idle) == 0L) return(NULL)
      i <- idle[[1L]]
      if (!private$sessions[[i]]$is_alive()) private$sessions[[i]] <- do.call(SecureSession$new, private$args)
      private$busy[[i]] <- TRUE
      i
    },

    release = function(i) {
      if (private$reset) try(private$sessions[[i]]$restart(), silent = TRUE)
      private$busy[[i]] <- FALSE
    },

    finalize = function() try(self$close(), silent = TRUE)
  )
)

execute_r <- function(code, tools = list(), timeout = 30, sandbox = TRUE, limits = NULL, verbose = FALSE, validate = TRUE,
                      sandbox_strict = FALSE, audit_log = NULL) {
  session <- SecureSession$new(tools = tools, sandbox = sandbox, limits = limits, verbose = verbose,
                               sandbox_strict = sandbox_strict, audit_log = audit_log)
  on.exit(session$close())
  session$execute(code, timeout = timeout, validate = validate)
}

with_secure_session <- function(fn, tools = list(), sandbox = TRUE, ...) {
  session <- SecureSession$new(tools = tools, sandbox = sandbox, ...)
  on.exit(session$close(), add = TRUE)
  fn(session)
}

# Calls a reviewer may want to know about. Advisory: the kernel decides what runs.
ADVISORY_CALLS <- c("system", "system2", "shell", ".Internal", "Sys.setenv", ".Call", ".C", ".Fortran", ".External",
                    "dyn.load", "pipe", "socketConnection", "url", "do.call", "run", "r")

validate_code <- function(code) {
  if (!is.character(code) || length(code) != 1) securer_stop("`code` must be a single character string")
  parsed <- tryCatch(parse(text = code, keep.source = TRUE), error = function(e) e)
  if (inherits(parsed, "error")) return(list(valid = FALSE, error = conditionMessage(parsed), warnings = character(0)))
  data <- utils::getParseData(parsed, includeText = TRUE)
  called <- if (is.null(data)) character(0) else unique(data$text[data$token == "SYMBOL_FUNCTION_CALL"])
  # processx::run and callr::r only as namespaced calls (a bare run() or r() is anyone's).
  namespaced <- if (is.null(data)) character(0) else {
    pkgs <- data$text[data$token == "SYMBOL_PACKAGE"]
    c(if ("processx" %in% pkgs) "processx::run", if ("callr" %in% pkgs) "callr::r")
  }
  flagged <- c(intersect(setdiff(ADVISORY_CALLS, c("run", "r")), called), intersect(namespaced, c("processx::run", "callr::r")))
  list(valid = TRUE, error = NULL,
       warnings = sprintf("Code contains call to `%s()` which may be restricted by the sandbox", flagged))
}

securer_ellmer_tool <- function(session = NULL, tools = list(), sandbox = TRUE, limits = NULL, timeout = 30) {
  if (!requireNamespace("ellmer", quietly = TRUE)) securer_stop("Package ellmer is required for as_ellmer_tool().", class = "rsandbox_setup_error")
  if (is.null(session)) session <- SecureSession$new(tools = tools, sandbox = sandbox, limits = limits)
  ns <- asNamespace("ellmer")
  run <- function(code) {
    if (!session$is_alive()) return(get("ContentToolResult", ns)(error = "SecureSession is no longer alive."))
    tryCatch({
      value <- session$execute(code, timeout = timeout)
      out <- attr(value, "output")
      paste(c(out, utils::capture.output(print(structure(value, output = NULL)))), collapse = "\n")
    }, error = function(e) get("ContentToolResult", ns)(error = sanitize_error_message(conditionMessage(e))))
  }
  get("tool", ns)(run, name = "execute_r_code",
    description = "Execute R code in an isolated R session (kernel-enforced sandbox). The last expression's value is returned.",
    arguments = list(code = get("type_string", ns)("R code to execute.")))
}
