#' Limits for a sandbox
#'
#' Checked here: a wrong limit is an \code{rsandbox_bad_input} error naming it, before
#' anything is started.
#'
#' @param memory Memory the code may allocate: a size (\code{"512M"}, \code{"2G"};
#'   binary units, \code{"k"}, \code{"M"}, \code{"G"}, \code{"T"}) or a whole number of
#'   bytes.
#' @param cpu CPU seconds (a whole number).
#' @param disk Disk quota of the workspace (\code{"100M"}).
#' @param fsize Largest file the code may write.
#' @param nproc Processes at once (a whole number).
#' @param nofile Open files (a whole number, at least 16).
#' @param max_output Largest stdout + stderr + result (\code{"1M"}).
#' @param network The hosts the sandbox may reach: a character vector of host patterns
#'   as in a profile's \code{[network] allow} (\code{"cran.test"},
#'   \code{"*.r-universe.dev"}, \code{"api.example.com:8443"}; port 443 unless given),
#'   or \code{character()} for no network at all. It narrows the allowlist of the
#'   profile the server runs (its \code{[network]} table), never widens it: a host
#'   outside it is an \code{rsandbox_input_error} naming the host. \code{NULL} (the
#'   default): the profile's allowlist. Without \code{[network]} in the profile the
#'   sandbox has no network, and only \code{character()} may be given.
#' @return A list of class \code{rsandbox_limits} for the \code{limits} arguments.
#' @examples
#' sandbox_limits(memory = "512M", cpu = 10)
#' sandbox_limits(network = c("cloud.r-project.org", "*.r-universe.dev"))
#' sandbox_limits(network = character()) # no network, whatever the profile allows
#' if (rsandbox_available()) {
#'   rsandbox_eval("length(1:1e6)", limits = sandbox_limits(memory = "1G"))
#' }
#' @export
sandbox_limits <- function(memory = NULL, cpu = NULL, disk = NULL, fsize = NULL, nproc = NULL,
                           nofile = NULL, max_output = NULL, network = NULL) {
  limits_checked(memory = memory, cpu = cpu, disk = disk, fsize = fsize, nproc = nproc, nofile = nofile,
                 max_output = max_output, network = network, call = rlang::current_env())
}

limits_checked <- function(memory = NULL, cpu = NULL, disk = NULL, fsize = NULL, nproc = NULL, nofile = NULL,
                           max_output = NULL, network = NULL, call) {
  whole <- function(x, arg, min) if (is.null(x)) NULL else check_count(x, min = min, arg = arg, call = call)
  limits <- list(memory = check_size(memory, "memory", call), cpu = whole(cpu, "cpu", 1),
                 disk = check_size(disk, "disk", call), fsize = check_size(fsize, "fsize", call),
                 nproc = whole(nproc, "nproc", 1), nofile = whole(nofile, "nofile", 16),
                 max_output = check_size(max_output, "max_output", call),
                 network = check_network(network, "network", call))
  structure(limits[!vapply(limits, is.null, logical(1))], class = "rsandbox_limits")
}

#' @export
format.rsandbox_limits <- function(x, ...) {
  if (!length(x)) return("default limits")
  shown <- vapply(names(x), function(name) {
    if (identical(name, "network")) {
      hosts <- unlist(x$network$allow)
      return(if (length(hosts)) paste(hosts, collapse = ",") else "none")
    }
    format(x[[name]], scientific = FALSE)
  }, character(1))
  paste(paste0(names(x), "=", shown), collapse = " ")
}

#' @export
print.rsandbox_limits <- function(x, ...) {
  cat("<rsandbox_limits> ", format(x), "\n", sep = "")
  invisible(x)
}

#' A host function callable from sandboxed code
#'
#' @param name The name the sandboxed code calls.
#' @param fn An R function, run in the caller's session when the sandboxed code calls
#'   \code{name(...)}.
#' @param description What it does (for people and models).
#' @param args Named list of argument types: \code{"numeric"}, \code{"integer"},
#'   \code{"character"}, \code{"logical"}, \code{"list"}, \code{"data_frame"},
#'   \code{"any"}. Defaults to the formals of \code{fn}, typed \code{"any"}.
#' @return An \code{rsandbox_tool}. A tool object of the securer package is accepted
#'   wherever an \code{rsandbox_tool} is.
#' @examples
#' add <- sandbox_tool("add", function(a, b) a + b, "adds two numbers",
#'                     args = list(a = "numeric", b = "numeric"))
#' add
#' if (rsandbox_available()) {
#'   s <- sandbox_session(tools = list(add))
#'   s$execute("add(2, 3)")
#'   s$close()
#' }
#' @export
sandbox_tool <- function(name, fn, description = "", args = NULL) {
  if (!is.character(name) || length(name) != 1L || is.na(name) || !grepl("^[A-Za-z.][A-Za-z0-9_.]*$", name)) {
    bad_input("{.arg name} must be one syntactic R name, not {describe(name)}.")
  }
  if (!is.function(fn)) bad_input("{.arg fn} must be a function, not {describe(fn)}.")
  if (!is.character(description) || length(description) != 1L || is.na(description)) {
    bad_input("{.arg description} must be a string, not {describe(description)}.")
  }
  types <- c("numeric", "integer", "character", "logical", "list", "data_frame", "any")
  if (!is.null(args)) {
    if (!is.list(args) && !is.character(args) || (length(args) && (is.null(names(args)) || any(!nzchar(names(args)))))) {
      bad_input("{.arg args} must be a named list of argument types, not {describe(args)}.")
    }
    wrong <- setdiff(unlist(lapply(args, as.character)), types)
    if (length(wrong)) bad_input(c("Unknown argument type{?s} {.val {wrong}} in {.arg args}.", i = "Types: {.val {types}}."))
  }
  if (is.null(args)) args <- stats::setNames(as.list(rep("any", length(formals(fn)))), names(formals(fn)))
  structure(list(name = name, fn = fn, description = description, args = as.list(args)), class = "rsandbox_tool")
}

# securer's tools (and lists that look like them) as rsandbox tools.
as_tool <- function(tool, call = rlang::caller_env()) {
  if (inherits(tool, "rsandbox_tool")) return(tool)
  if (is.list(tool) && is.character(tool$name) && is.function(tool$fn)) {
    args <- tool$args
    if (is.null(args)) args <- stats::setNames(as.list(rep("any", length(formals(tool$fn)))), names(formals(tool$fn)))
    return(sandbox_tool(tool$name, tool$fn, tool$description %||% "", lapply(args, map_type)))
  }
  bad_input(c("Not a tool: {describe(tool)}.", i = "Make tools with {.fn sandbox_tool}."), call = call)
}

# securer's argument type names, where they differ.
map_type <- function(type) {
  type <- as.character(type)[1]
  switch(type, double = "numeric", number = "numeric", string = "character", boolean = "logical",
         dataframe = "data_frame", data.frame = "data_frame", type)
}

tool_spec <- function(tool) {
  list(name = tool$name, description = tool$description,
       args = if (length(tool$args)) lapply(tool$args, function(t) t) else structure(list(), names = character()))
}

code_text <- function(code) {
  if (is.character(code)) return(paste(code, collapse = "\n"))
  if (is.call(code) && identical(code[[1]], as.name("{"))) {
    return(paste(vapply(as.list(code)[-1], function(e) paste(deparse(e), collapse = "\n"), character(1)), collapse = "\n"))
  }
  paste(deparse(code), collapse = "\n")
}

#' Evaluate R code in a fresh sandbox
#'
#' What the code prints, its messages and its standard error appear on your console as
#' they happen (messages and standard error as messages, class
#' \code{rsandbox_message}, so \code{suppressMessages()} hides them); its warnings are
#' signalled here as warnings (class \code{rsandbox_warning}) when it has finished, as
#' R shows its own. Control characters in that text are shown inert (\code{ESC} as
#' \code{^[}). The value is returned as an ordinary R value, with no attributes and
#' no class of this package: \code{identical(rsandbox_eval("42"), 42)} is \code{TRUE}.
#' It is returned invisibly when the sandbox has already printed it (a visible value
#' is auto-printed by the sandbox's R, with its real class, e.g. a model summary), so
#' it is not shown twice.
#'
#' Everything else the evaluation produced (stdout, messages, warnings, plots, usage)
#' is in the full result: \code{result = TRUE} returns it instead of the value, and
#' \code{\link{rsandbox_last_result}()} returns the last one.
#'
#' @param code A string, or an unevaluated expression (\code{quote()} or a braced block);
#'   or a function, called in the sandbox with \code{args} (as \code{do.call()}; the
#'   function is deparsed, so it sees the sandbox's globals, not its own environment).
#' @param timeout Seconds (a positive number).
#' @param limits \code{\link{sandbox_limits}()}.
#' @param files Named character vector of host paths to place in the workspace under
#'   their names, e.g. \code{c("data.csv" = "~/data.csv")}. Every element must be named.
#' @param profile The policy profile: a built-in one (\code{"strict"}, the default;
#'   \code{"base"}; \code{"compile"}) or a TOML file (read paths, programs, packages,
#'   a function allowlist, limits: see the rsandbox README). Each profile is served by
#'   a server of its own.
#' @param quiet \code{TRUE}: nothing is shown on the console nor signalled as a warning
#'   (the full result still has it); the value is then returned visibly.
#' @param globals A named list of values defined in the sandbox before the code runs.
#'   They travel as data, never as code: logical, integer, double and character vectors
#'   (with names and \code{NA}), matrices and arrays, factors, \code{Date},
#'   \code{POSIXct}, data frames and lists of these; anything else (a function, an
#'   environment, an external pointer, a model fit) is an \code{rsandbox_bad_input}
#'   error before anything runs.
#' @param args With a function as \code{code}: the list of its arguments (values as for
#'   \code{globals}).
#' @param typed \code{TRUE}: the value comes back with its R types and classes (integer
#'   stays integer, a factor a factor, a data frame keeps its column classes and row
#'   names), as data in the same encoding as \code{globals}; a value that cannot travel
#'   (a model fit) comes back as with \code{FALSE}. \code{FALSE}: through plain JSON,
#'   numbers as doubles. The default is \code{TRUE} when \code{globals} or a function
#'   are given.
#' @param result \code{TRUE}: return the full result (an \code{rsandbox_result}: a list
#'   with \code{value}, \code{visible}, \code{outcome}, \code{stdout}, \code{stderr},
#'   \code{messages}, \code{warnings}, \code{plots}, \code{usage}) instead of the value.
#' @return The value; an \code{rsandbox_error} condition when the code fails or a limit
#'   is reached (\code{rsandbox_input_error} when a function allowlist refuses the code,
#'   or the profile itself is wrong; \code{rsandbox_bad_input} for a wrong argument).
#' @examples
#' if (rsandbox_available()) {
#'   x <- rsandbox_eval("summary(lm(mpg ~ wt, mtcars))$r.squared")
#'   x + 1
#'   # Values in, values out: a function and its arguments, or globals.
#'   rsandbox_eval(function(d, k) d$mpg[1:3] * k, args = list(mtcars, 2))
#'   rsandbox_eval("table(g)", globals = list(g = factor(c("a", "b", "a"))))
#'   # Errors are classed conditions carrying the sandbox's call stack.
#'   e <- tryCatch(rsandbox_eval("f <- function() stop('no'); f()"), rsandbox_error = function(e) e)
#'   class(e)
#'   e$sandbox_trace
#'   # system() is a forbidden program start: the sandbox is ended.
#'   tryCatch(rsandbox_eval("system('id')"), rsandbox_violation = function(e) e$syscall)
#' }
#' @export
rsandbox_eval <- function(code, timeout = 30, limits = sandbox_limits(), files = NULL, profile = NULL,
                          quiet = FALSE, result = FALSE, globals = NULL, args = NULL, typed = NULL) {
  call <- rlang::current_env()
  values <- check_values(code, globals, args, typed, call = call)
  text <- values$code
  timeout <- check_timeout(timeout)
  limits <- check_limits(limits)
  files <- check_files(files)
  check_flag(quiet)
  check_flag(result)
  args <- profile_args(profile)
  request <- list(op = "eval", code = text, timeout = timeout)
  if (!is.null(values$globals)) request$globals <- values$globals
  if (values$typed) request$typed <- TRUE
  if (length(limits)) request$limits <- unclass(limits)
  if (length(files)) {
    request$files <- unname(Map(function(name, path) {
      list(path = name, data_base64 = jsonlite::base64_enc(readBin(path, "raw", file.info(path)$size)))
    }, names(files), files))
  }
  server <- server_for(args, call = call)
  evaluate(server, request, timeout, quiet = quiet, want_result = result, call = call)
}

# Send an `eval` or `session.execute` request and turn its answer into what the caller
# gets: streamed output shown (or handed to `handler`), warnings signalled, the full
# result kept for rsandbox_last_result(), a condition for a failure, else the value.
evaluate <- function(server, request, timeout, quiet = FALSE, want_result = FALSE, handler = NULL, echo = TRUE,
                     on_abandon = NULL, call = NULL) {
  adapter <- output_adapter(handler)
  on_console <- is.null(adapter) && !quiet
  feed <- if (!is.null(adapter)) adapter$feed else if (on_console) console_output
  if (!is.null(feed)) request$stream <- TRUE
  id <- server$send(request, on_output = feed, call = call)
  done <- FALSE
  # Left early (an interrupt, an error in the handler, invokeRestart("abort")): the
  # answer that comes later is dropped, and the running code is stopped.
  on.exit(if (!done) {
    server$abandon(id)
    if (!is.null(on_abandon)) try(on_abandon(), silent = TRUE)
  })
  response <- server$wait(id, timeout + 30, call = call)
  done <- TRUE
  if (!is.null(adapter)) adapter$finish()
  if (!is.null(response$error)) rlang::cnd_signal(error_response(response, call = call))
  r <- response$result
  full <- as_result(r)
  .state$last_result <- full
  if (on_console) {
    signal_warnings(r)
    n <- length(full$plots)
    if (n && !want_result) {
      message(sandbox_message(sprintf("[%d plot%s: rsandbox_last_result()$plots]\n", n, if (n > 1) "s" else "")))
    }
  }
  condition <- condition_for(r, call = call)
  if (!is.null(condition)) rlang::cnd_signal(condition)
  if (want_result) return(full)
  # Shown already when the sandbox auto-printed it onto this console.
  if (isTRUE(full$visible) && (!on_console || !echo)) full$value else invisible(full$value)
}

#' The full result of the last evaluation
#'
#' \code{\link{rsandbox_eval}()} and a session's \code{$execute()} return the value
#' only; this is everything the last of them (in this R session, whatever its outcome)
#' produced.
#'
#' @return An \code{rsandbox_result} (a list: \code{value}, \code{visible},
#'   \code{outcome}, \code{stdout}, \code{stderr}, \code{messages}, \code{warnings},
#'   \code{plots}, \code{usage}, \code{error}, \code{reset}, \code{reset_reason},
#'   \code{network}: the connections made through the network allowlist's proxy, a data
#'   frame with \code{host}, \code{port}, \code{allowed}, \code{address},
#'   \code{bytes_in}, \code{bytes_out}, \code{duration_ms}, \code{reason}, or
#'   \code{NULL} when there was none), or \code{NULL} before the first evaluation.
#' @examples
#' if (rsandbox_available()) {
#'   rsandbox_eval("message('hi'); 42", quiet = TRUE)
#'   r <- rsandbox_last_result()
#'   r$messages
#'   r$usage$wall_ms
#' }
#' @export
rsandbox_last_result <- function() .state$last_result

.state <- new.env(parent = emptyenv())

default_server <- function() server_for(character())

# The server started with these command-line arguments: one per distinct set (a
# profile is fixed for a server's life), started on first use and again if it died.
server_for <- function(args, call = rlang::caller_env()) {
  if (is.null(.state$servers)) .state$servers <- new.env(parent = emptyenv())
  key <- if (length(args)) paste(args, collapse = "\n") else "default"
  server <- .state$servers[[key]]
  if (is.null(server)) {
    server <- Server$new(args, call = call)
    assign(key, server, envir = .state$servers)
  } else {
    server$ensure_alive(call = call)
  }
  server
}

# `--profile` for a profile name or file; a file by its absolute path, since the
# server need not share this session's working directory.
profile_args <- function(profile, call = rlang::caller_env()) {
  if (is.null(profile)) return(character())
  if (!is.character(profile) || length(profile) != 1L || is.na(profile) || !nzchar(profile)) {
    bad_input("{.arg profile} must be one profile name or file path, not {describe(profile)}.", call = call)
  }
  if (file.exists(profile)) profile <- normalizePath(profile)
  c("--profile", profile)
}
