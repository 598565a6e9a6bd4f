#' Limits for a sandbox
#'
#' @param memory Memory the code may allocate (\code{"512M"}, \code{"2G"}).
#' @param cpu CPU seconds.
#' @param disk Disk quota of the workspace (\code{"100M"}).
#' @param fsize Largest file the code may write.
#' @param nproc Processes at once.
#' @param nofile Open files.
#' @param max_output Largest stdout + stderr + result (\code{"1M"}).
#' @return A list for the \code{limits} arguments.
#' @export
sandbox_limits <- function(memory = NULL, cpu = NULL, disk = NULL, fsize = NULL, nproc = NULL,
                           nofile = NULL, max_output = NULL) {
  size <- function(x) if (is.null(x)) NULL else if (is.numeric(x)) format(x, scientific = FALSE) else as.character(x)
  limits <- list(memory = size(memory), cpu = cpu, disk = size(disk), fsize = size(fsize),
                 nproc = nproc, nofile = nofile, max_output = size(max_output))
  structure(limits[!vapply(limits, is.null, logical(1))], class = "rsandbox_limits")
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
#' @export
sandbox_tool <- function(name, fn, description = "", args = NULL) {
  stopifnot(is.character(name), length(name) == 1L, is.function(fn))
  if (is.null(args)) args <- stats::setNames(as.list(rep("any", length(formals(fn)))), names(formals(fn)))
  structure(list(name = name, fn = fn, description = description, args = as.list(args)), class = "rsandbox_tool")
}

# securer's tools (and lists that look like them) as rsandbox tools.
as_tool <- function(tool) {
  if (inherits(tool, "rsandbox_tool")) return(tool)
  if (is.list(tool) && is.character(tool$name) && is.function(tool$fn)) {
    args <- tool$args
    if (is.null(args)) args <- stats::setNames(as.list(rep("any", length(formals(tool$fn)))), names(formals(tool$fn)))
    return(sandbox_tool(tool$name, tool$fn, tool$description %||% "", lapply(args, map_type)))
  }
  stop("not a tool: use sandbox_tool(name, fn, description, args)")
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

value_or_condition <- function(response) {
  if (!is.null(response$error)) stop(error_response(response))
  result <- response$result
  condition <- condition_for(result)
  if (!is.null(condition)) stop(condition)
  as_result(result)
}

#' Evaluate R code in a fresh sandbox
#'
#' @param code A string, or an unevaluated expression (\code{quote()} or a braced block).
#' @param timeout Seconds.
#' @param limits \code{\link{sandbox_limits}()}.
#' @param files Named character vector of host paths to place in the workspace under
#'   their names, e.g. \code{c("data.csv" = "~/data.csv")}.
#' @param profile The policy profile: a built-in one (\code{"strict"}, the default;
#'   \code{"base"}; \code{"compile"}) or a TOML file (read paths, programs, packages,
#'   a function allowlist, limits: see the rsandbox README). Each profile is served by
#'   a server of its own.
#' @return The value (see Details of \code{\link{sandbox_session}}); an
#'   \code{rsandbox_error} condition when the code fails or a limit is reached
#'   (\code{rsandbox_input_error} when a function allowlist refuses the code, or the
#'   profile itself is wrong).
#' @export
rsandbox_eval <- function(code, timeout = 30, limits = sandbox_limits(), files = NULL, profile = NULL) {
  server <- server_for(profile_args(profile))
  request <- list(op = "eval", code = code_text(code), timeout = timeout)
  if (length(limits)) request$limits <- unclass(limits)
  if (length(files)) {
    request$files <- unname(Map(function(name, path) {
      list(path = name, data_base64 = jsonlite::base64_enc(readBin(path, "raw", file.info(path)$size)))
    }, names(files), files))
  }
  value_or_condition(server$request(request, timeout + 30))
}

.state <- new.env(parent = emptyenv())

default_server <- function() server_for(character())

# The server started with these command-line arguments: one per distinct set (a
# profile is fixed for a server's life), started on first use and again if it died.
server_for <- function(args) {
  if (is.null(.state$servers)) .state$servers <- new.env(parent = emptyenv())
  key <- if (length(args)) paste(args, collapse = "\n") else "default"
  server <- .state$servers[[key]]
  if (is.null(server) || !server$is_alive()) {
    server <- Server$new(args)
    assign(key, server, envir = .state$servers)
  }
  server
}

# `--profile` for a profile name or file; a file by its absolute path, since the
# server need not share this session's working directory.
profile_args <- function(profile) {
  if (is.null(profile)) return(character())
  if (!is.character(profile) || length(profile) != 1L || !nzchar(profile)) {
    stop(rsandbox_condition("rsandbox_input_error", "profile must be one profile name or file path", state_kept = NA))
  }
  if (file.exists(profile)) profile <- normalizePath(profile)
  c("--profile", profile)
}
