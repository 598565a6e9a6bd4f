# Arguments checked before anything is sent, so that a wrong one is an
# `rsandbox_bad_input` error in R's terms, naming the argument and the function the
# caller called, instead of whatever the server or processx would have said.

check_timeout <- function(timeout, arg = rlang::caller_arg(timeout), call = rlang::caller_env()) {
  if (!is.numeric(timeout) || length(timeout) != 1L || is.na(timeout) || !is.finite(timeout) || timeout <= 0) {
    bad_input("{.arg {arg}} must be a positive number of seconds, not {describe(timeout)}.", call = call)
  }
  if (timeout > 86400) bad_input("{.arg {arg}} must be at most 86400 seconds (a day), not {timeout}.", call = call)
  as.numeric(timeout)
}

check_flag <- function(x, arg = rlang::caller_arg(x), call = rlang::caller_env()) {
  if (!is.logical(x) || length(x) != 1L || is.na(x)) {
    bad_input("{.arg {arg}} must be {.code TRUE} or {.code FALSE}, not {describe(x)}.", call = call)
  }
  x
}

check_count <- function(x, min = 0, arg = rlang::caller_arg(x), call = rlang::caller_env()) {
  if (!is.numeric(x) || length(x) != 1L || is.na(x) || !is.finite(x) || x != round(x) || x < min) {
    bad_input("{.arg {arg}} must be a whole number of at least {min}, not {describe(x)}.", call = call)
  }
  as.numeric(x)
}

check_handler <- function(handler, arg = rlang::caller_arg(handler), call = rlang::caller_env()) {
  if (!is.null(handler) && !is.function(handler)) {
    bad_input("{.arg {arg}} must be a function or {.code NULL}, not {describe(handler)}.", call = call)
  }
  handler
}

# Code: a string (or lines), or an unevaluated expression; the text sent.
check_code <- function(code, arg = rlang::caller_arg(code), call = rlang::caller_env()) {
  ok <- (is.character(code) && length(code) >= 1L && !anyNA(code)) || is.call(code) || is.name(code) ||
    ((is.numeric(code) || is.logical(code)) && length(code) == 1L && !is.na(code))
  if (!ok) {
    bad_input(c("{.arg {arg}} must be R code as a string or an unevaluated expression, not {describe(code)}.",
                i = "Use a string ({.code \"1 + 1\"}) or {.code quote(...)}."), call = call)
  }
  text <- code_text(code)
  if (!nzchar(trimws(text))) bad_input("{.arg {arg}} is empty: there is no code to run.", call = call)
  text
}

# `files`: a named character vector of host paths, every one an existing regular file.
check_files <- function(files, arg = rlang::caller_arg(files), call = rlang::caller_env()) {
  if (is.null(files) || length(files) == 0L) return(NULL)
  if (!is.character(files) || anyNA(files)) {
    bad_input("{.arg {arg}} must be a named character vector of file paths, not {describe(files)}.", call = call)
  }
  nm <- names(files)
  if (is.null(nm) || anyNA(nm) || any(!nzchar(nm))) {
    bad_input(c("Every element of {.arg {arg}} must be named: the name is the path in the sandbox's workspace.",
                i = "For example {.code files = c(\"data.csv\" = \"~/data.csv\")}."), call = call)
  }
  if (anyDuplicated(nm)) bad_input("The names of {.arg {arg}} must be unique; {.val {nm[duplicated(nm)]}} is repeated.", call = call)
  missing <- files[!file.exists(files) | dir.exists(files)]
  if (length(missing)) bad_input("{.arg {arg}}: no such file: {.file {missing}}.", call = call)
  files
}

# Limits as a `rsandbox_limits`: one from sandbox_limits() as it is, a named list
# checked through sandbox_limits().
check_limits <- function(limits, arg = rlang::caller_arg(limits), call = rlang::caller_env()) {
  if (is.null(limits) || inherits(limits, "rsandbox_limits")) return(limits %||% sandbox_limits())
  if (!is.list(limits) || (length(limits) && (is.null(names(limits)) || any(!nzchar(names(limits)))))) {
    bad_input("{.arg {arg}} must come from {.fn sandbox_limits}, not {describe(limits)}.", call = call)
  }
  known <- names(formals(sandbox_limits))
  unknown <- setdiff(names(limits), known)
  if (length(unknown)) {
    bad_input(c("{.arg {arg}} has unknown limit{?s} {.val {unknown}}.", i = "Known limits: {.val {known}}."), call = call)
  }
  do.call(limits_checked, c(limits, list(call = call)))
}

# A size: a positive whole number of bytes, or a string such as "512M", "2G", "64k"
# (binary units; "MB" and "MiB" mean "M").
check_size <- function(x, arg, call) {
  if (is.null(x)) return(NULL)
  if (is.numeric(x) && length(x) == 1L && !is.na(x) && is.finite(x) && x >= 1 && x == round(x)) {
    return(format(x, scientific = FALSE, trim = TRUE))
  }
  if (is.character(x) && length(x) == 1L && !is.na(x) && grepl("^\\s*[0-9]+(\\.[0-9]+)?\\s*([kKmMgGtT]?[iI]?[bB]?)\\s*$", x) &&
      !grepl("^\\s*[0.]+\\s*[a-zA-Z]*\\s*$", x)) {
    return(gsub("\\s", "", x))
  }
  bad_input(c("{.arg {arg}} must be a size such as {.val 512M} or {.val 1.5G}, or a whole number of bytes, not {describe(x)}."),
            call = call)
}

# `network`: host patterns (a character vector; `character()`: no network; or the
# `list(allow = ...)` this returns), as the `limits.network` object every server takes:
# `list(allow = list(...))`, so that one host is still a JSON array. The patterns themselves are checked by the server, which
# knows its allowlist and names a wrong or outside entry.
check_network <- function(x, arg, call) {
  if (is.null(x)) return(NULL)
  if (is.list(x) && identical(names(x), "allow")) x <- unlist(x$allow) %||% character()
  if (!is.character(x) || anyNA(x) || any(!nzchar(x)) || any(grepl("[[:space:],]", x))) {
    bad_input(c("{.arg {arg}} must be a character vector of host names, not {describe(x)}.",
                i = "For example {.code c(\"cloud.r-project.org\", \"*.r-universe.dev\")}, or {.code character()} for no network."),
              call = call)
  }
  list(allow = as.list(unname(x)))
}

# A short description of a wrong value, for error messages.
describe <- function(x) {
  if (is.null(x)) return("NULL")
  if (is.function(x)) return("a function")
  if ((is.character(x) || is.numeric(x) || is.logical(x)) && length(x) == 1L) {
    shown <- if (is.character(x) && !is.na(x)) paste0("\"", inert(x), "\"") else format(x)
    return(paste0(switch(typeof(x), character = "the string ", double = , integer = "the number ", logical = ""), shown))
  }
  paste0(if (is.object(x)) paste0("an object of class <", class(x)[1], ">") else paste0("a ", typeof(x), " vector"),
         " of length ", length(x))
}

# Code, globals, a function's args and `typed`, checked and encoded before anything is
# sent: list(code = <text>, globals = <JSON text or NULL>, typed = <flag>).
check_values <- function(code, globals, args, typed, call = rlang::caller_env()) {
  if (!is.null(typed)) check_flag(typed, call = call)
  if (is.function(code)) {
    fn <- function_call(code, if (is.null(args)) list() else args, call = call)
    return(list(code = fn$code, globals = encode_globals(globals, extra = fn$globals, call = call),
                typed = typed %||% TRUE))
  }
  if (!is.null(args)) {
    bad_input(c("{.arg args} is for a function as {.arg code}.",
                i = "For example {.code rsandbox_eval(function(x, y) x + y, args = list(1, 2))}; values for code go in {.arg globals}."),
              call = call)
  }
  text <- check_code(code, arg = "code", call = call)
  list(code = text, globals = encode_globals(globals, call = call), typed = typed %||% !is.null(globals))
}

# `audit_log`: a path the server will accept, checked here so that a wrong one is an
# `rsandbox_bad_input` error up front rather than a server that refuses to start. The
# server accepts a regular file that nobody else can read (mode 0600), or a new path
# (created 0600); it refuses symlinks, devices (`/dev/null`, `/dev/full`, ...), FIFOs,
# sockets and directories (it checks again, without following links, when it opens the
# file). A missing directory is created, as securer does.
check_audit_log <- function(path, arg = rlang::caller_arg(path), call = rlang::caller_env()) {
  if (is.null(path)) return(NULL)
  if (!is.character(path) || length(path) != 1L || is.na(path) || !nzchar(path)) {
    bad_input("{.arg {arg}} must be a file path, not {describe(path)}.", call = call)
  }
  force(arg) # named before `path` changes below
  path <- path.expand(path)
  dir <- dirname(path)
  under <- function(p) grepl("^/(dev|proc|sys)(/|$)", p)
  if (under(path) || under(normalizePath(dir, mustWork = FALSE))) {
    bad_input(c("{.arg {arg}} must be a regular file, not a device file: {.file {path}}.",
                i = "The audit log is a JSONL file; use a path such as {.file ~/rsandbox-audit.jsonl}."), call = call)
  }
  # Sys.readlink() is "" for a file that is not a symlink, NA for a missing path.
  link <- Sys.readlink(path)
  if (!is.na(link) && nzchar(link)) {
    bad_input(c("{.arg {arg}} must not be a symlink: {.file {path}} is one.",
                i = "Name the file it points to, or a new file."), call = call)
  }
  if (dir.exists(path)) bad_input("{.arg {arg}} must be a file, not a directory: {.file {path}}.", call = call)
  if (file.exists(path)) {
    mode <- as.integer(file.info(path, extra_cols = FALSE)$mode)
    if (bitwAnd(mode, strtoi("077", 8L)) != 0L) {
      bad_input(c("{.arg {arg}} must be a file only you can read (mode 0600): {.file {path}} has mode {format(as.octmode(mode), width = 4)}.",
                  i = "Run {.code Sys.chmod({deparse(path)}, \"0600\")}, or name a new file (it is created 0600)."), call = call)
    }
  } else if (!dir.exists(dir) && !dir.create(dir, recursive = TRUE, showWarnings = FALSE)) {
    bad_input("{.arg {arg}}: the directory {.file {dir}} does not exist and could not be created.", call = call)
  }
  path
}
