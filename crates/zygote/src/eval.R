# rsandbox evaluation harness.
#
# The zygote evaluates this file once, at start-up, into a fresh environment
# whose parent is baseenv(), so nothing a user later puts in globalenv() can
# shadow the functions below. Only base functions are used unqualified;
# everything else is reached through `pkg::`. Entry points:
#
#   .rsb_resolve_routines()           once, in the zygote, after it registers its routines
#   rsandbox_prepare_zygote(preload)  once, in the zygote, before forking
#   rsandbox_eval(code, plot_dir, stream, echo)  per request in a forked child; returns JSON
#   rsandbox_allow(names)             the profile's function allowlist (once per child)
#   rsandbox_snapshot(file) / rsandbox_restore(file)  a session's global
#                                     environment to and from a file in the workspace
#   rsandbox_to_json(x)               encoder used for the returned value
#   rsandbox_to_typed_json(x)         the typed encoder (`value_typed`, "Typed values" below)
#
# Result of rsandbox_eval(): a character(1) JSON object, always with the keys
#
#   {"status": "ok" | "error" | "syntax_error" | "memory_limit" | "process_limit"
#              | "interrupted",
#    "value": <last visible value (with echo = "0": the last value, visible
#              or not), encoded as below, or null>,
#    "visible": <true iff the last top-level expression evaluated was visible;
#                false after an error>,
#    "messages": [<conditionMessage of each message(), trailing "\n" kept>],
#    "warnings": [{"message": <text>, "call": <deparsed call or null>}],
#    "error": null | {"message": <text>, "call": <deparsed call or null>,
#              "trace": [<deparsed call>, ...] (outermost first; absent when empty)},
#    "syntax_error": null | {"message": <text>, "line": <int|null>, "column": <int|null>}}
#
# and, once the code ran, "plotted": whether a device of options(device) was opened, or a
# forked worker may have opened one (the child reads the plot directory only then, and
# takes the key out of the result).
#
# JSON encoding rules (rsandbox_to_json):
#   - NULL -> null.
#   - Atomic vectors (logical, integer, double, character, complex):
#     length 1 and unnamed -> scalar; otherwise an array; a vector whose names
#     are all non-empty -> an object (otherwise names are dropped).
#   - NA (of any type) -> null.
#   - Doubles: the shortest of 15, 16 or 17 significant digits ("%.*g") that
#     reads back as the same double, so 0.1 -> 0.1, 1e5 -> 100000,
#     1e20 -> 1e+20. Integers print without a decimal point.
#     NaN -> "NaN", Inf -> "Inf", -Inf -> "-Inf" (as JSON strings).
#   - Complex -> strings, e.g. "1+2i".
#   - Strings are output as UTF-8; " \ and control characters are escaped
#     (\n \r \t \b \f, others below 0x20 as \u00XX); other non-ASCII
#     characters are written as-is. Invalid UTF-8 bytes become U+FFFD.
#   - factor -> its labels (same scalar/array/object rule as vectors).
#   - Date -> "YYYY-MM-DD"; POSIXct/POSIXlt -> "YYYY-MM-DDTHH:MM:SS+HH:MM"
#     in the session time zone (fractional seconds are dropped).
#   - data.frame -> array of row objects ({"col": value, ...}), NA -> null.
#     Character (non-automatic) row names are added as a "_row" field first,
#     as jsonlite does. List columns are encoded element by element.
#   - matrix -> array of row arrays (dimnames are dropped); arrays with more
#     dimensions nest the same way, first index outermost.
#   - list: all names non-empty -> object; otherwise array (a length-1 list
#     is still an array). Nesting deeper than 100 levels falls back to the
#     printed form below.
#   - Anything else -- functions, environments, symbols, calls, formulas,
#     raw vectors, S4 objects, and every classed object (is.object(x)) other
#     than factor, data.frame, Date, POSIXct and POSIXlt, e.g. lm fits ->
#     {"class": [<class(x)>], "printed": <print(x) output, lines joined
#     with "\n", truncated to 10000 characters>}.
#   - The encoder never fails: if encoding raises an error the printed form
#     is used, and if even that fails {"class": [], "printed": ""}.

# ---------------------------------------------------------------------------
# State shared by the functions below. Private to each forked child once the
# zygote has forked.

.rsb_state <- new.env(parent = emptyenv())
.rsb_state$png_type <- "cairo"
.rsb_state$devices <- 0L
.rsb_state$seeded <- FALSE
.rsb_state$stream <- FALSE

.rsb_max_depth <- 100L
.rsb_max_printed <- 10000L

# ---------------------------------------------------------------------------
# Zygote preparation

# `warm = FALSE` skips warming graphics and the evaluation path (about 170 ms): right
# for a zygote that forks once (the CLI's eval), wrong for one that forks many times.
rsandbox_prepare_zygote <- function(preload = character(), warm = TRUE) {
  for (pkg in as.character(preload)) {
    # Re-signal with the package name up front: some load failures (a broken
    # dependency, a missing shared library) do not name the package asked for.
    tryCatch(
      suppressPackageStartupMessages(library(pkg, character.only = TRUE)),
      error = function(e) {
        stop(sprintf("failed to preload package '%s': %s", pkg, conditionMessage(e)),
             call. = FALSE)
      }
    )
  }

  # User code arrives as UTF-8. In a non-UTF-8 locale (e.g. an unset LANG
  # gives "C") R prints non-ASCII text as <U+00E9> and the parser rejects
  # non-ASCII input when it reports syntax errors. Best effort only.
  if (!isTRUE(l10n_info()[["UTF-8"]])) {
    for (locale in c("C.UTF-8", "C.utf8", "en_US.UTF-8")) {
      if (nzchar(suppressWarnings(Sys.setlocale("LC_CTYPE", locale)))) break
    }
  }

  # Forking from inside a forked child just multiplies processes against the
  # sandbox's process limit; parallel code should run serially by default.
  if (is.null(getOption("mc.cores"))) options(mc.cores = 1L)

  # Without cairo, png() falls back to whatever bitmapType the build supports.
  if (!isTRUE(capabilities("cairo"))) {
    .rsb_state$png_type <- getOption("bitmapType")
  }
  options(device = .rsb_png_device)
  .rsb_setup_help()

  # A zygote that forks once (warm = FALSE) skips the fonts and the evaluation warm-up,
  # which cost hundreds of ms; its child must still be the same sandbox as a pre-forked
  # one: the same device modules loaded (cairo, R_X11), and a collected heap (below), so
  # that a memory limit gives the same figure on every path. (Warming the evaluation
  # here made the one child's first evaluation slower, not faster: measured 410 ms
  # against 125 ms.)
  if (warm) {
    .rsb_warm_graphics()
    .rsb_warm_evaluation()
  } else {
    .rsb_load_graphics()
  }

  # After the warm-up, whose warnings are not the children's.
  .rsb_define_last_warning()
  .rsb_set_last_warning(list())
  # Preloading may have drawn random numbers; children must not share a seed.
  .rsb_drop_seed()
  .rsb_state$seeded <- FALSE
  .rsb_state$devices <- 0L
  # Garbage left from start-up would otherwise be free heap that a child's code can fill
  # without growing its address space, i.e. beyond its memory limit.
  gc()
  invisible(NULL)
}

# The host's routines, resolved once in the zygote (right after it registers them, before
# the preparation above) for every child. `.Call("name")` would look the name up on each
# call, in every loaded library, the graphics modules' ~70 dependencies first (R searches
# the last loaded first): in a fresh child that is a page fault per library, and tens of
# microseconds in every session's execute.
.rsb_resolve_routines <- function() {
  names <- c(emit = "rsandbox_emit", request_values = "rsandbox_request_values",
             tool_call = "rsandbox_tool_call")
  .rsb_state$routines <- lapply(names, getNativeSymbolInfo, PACKAGE = "(embedding)")
  invisible(NULL)
}

# Run the evaluation path once, so every lazily loaded function it touches
# (and the memory it settles into) is loaded in the zygote and shared by all
# children, instead of being loaded again in each child (measured: ~90 ms of
# CPU over a child's first two evaluations without this). Output goes to the
# zygote's stdout (/dev/null); what it leaves in globalenv is removed.
.rsb_warm_evaluation <- function() {
  dir <- tempfile("rsandbox-warm-")
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  for (code in c("1 + 1", "x <- list(a = 1, b = 'c'); x", "list(a = 1:2, b = list(c = 'd'))",
                 "data.frame(x = 1:2, y = c('a', 'b'))",
                 "factor(c('a', 'b'))", "c(a = 1, b = 2)", "matrix(1:4, 2)", "Sys.Date()",
                 "message('m'); warning('w'); 1", "stop('e')", "f <- function(")) {
    # Twice: R's JIT compiles a function of this file's environment at its second
    # call (small ones never), so a helper called once here was compiled again in
    # every child that called it (~15-40 ms for the encoders of a data frame or a matrix).
    rsandbox_eval(code, dir)
    rsandbox_eval(code, dir)
  }
  rm(list = ls(globalenv(), all.names = TRUE), envir = globalenv())
}

# Help in the sandbox. R shows help pages, demo and vignette lists through a
# pager program and opens browsers and PDF viewers: programs the sandbox cannot
# start (an execve violation ended it). Here help pages render as text into the
# output (the pager is an R function, tools::Rd2txt runs in process), and what
# needs a viewer says in one line that there is none.
.rsb_setup_help <- function() {
  options(help_type = "text", pager = .rsb_pager, browser = .rsb_no_browser,
          pdfviewer = "false", editor = .rsb_no_editor)
  registerS3method("print", "vignette", .rsb_print_vignette, envir = asNamespace("utils"))
}

.rsb_pager <- function(files, header = "", title = "", delete.file = FALSE) {
  header <- rep_len(as.character(header), length(files))
  for (i in seq_along(files)) {
    if (!is.na(header[i]) && nzchar(header[i])) cat(header[i], "\n", sep = "")
    lines <- readLines(files[i], warn = FALSE)
    # Rd2txt marks titles with overstrikes ("_\bT" underlines T): plain text here.
    writeLines(gsub(".\b", "", lines, perl = TRUE))
    if (isTRUE(delete.file)) unlink(files[i])
  }
  invisible(NULL)
}

.rsb_no_browser <- function(url, ...) {
  message("no web browser in the sandbox: ", url, " was not opened")
  invisible(NULL)
}

.rsb_no_editor <- function(name = NULL, file = "", title = NULL, ...) {
  stop("no editor in the sandbox", call. = FALSE)
}

.rsb_print_vignette <- function(x, ...) {
  code <- if (nzchar(x$R)) file.path(x$Dir, "doc", x$R) else NULL
  message(sprintf("vignette %s: no viewer in the sandbox%s", sQuote(x$Topic, FALSE),
                  if (is.null(code)) "" else paste0("; its R code is in ", code)))
  invisible(x)
}

# Used as options(device): every plot that does not open its own device goes
# to numbered PNG files in the evaluation's plot directory. A second device
# opened in the same evaluation (dev.new()) gets its own prefix so it does not
# overwrite the first one's pages.
.rsb_png_device <- function(...) {
  .rsb_state$devices <- .rsb_state$devices + 1L
  n <- .rsb_state$devices
  pattern <- if (n == 1L) "plot-%03d.png" else sprintf("plot-%d-%%03d.png", n)
  .rsb_open_png(file.path(getOption("rsandbox.plot_dir", tempdir()), pattern))
}

.rsb_open_png <- function(filename) {
  # 7 x 7 inches, the size of R's own default device (pdf()), so that a plot that
  # fits there fits here (coplot's margins did not fit 800 x 600).
  grDevices::png(filename = filename, width = 672, height = 672, res = 96,
                 type = .rsb_state$png_type)
}

# The first plot in a process pays for fontconfig's cache scan and font
# loading (hundreds of ms); doing it in the zygote lets every child inherit
# the warm state through fork.
#
# It matters beyond speed. Pango 1.50 (the cairo device's text renderer)
# starts short-lived threads -- "[pango] FcFontSetMatch", "FcFontSetSort" --
# for every font pattern (family, face, size) it has not matched before, and
# if the thread cannot be created (threads count against RLIMIT_NPROC) GLib
# aborts the whole process with SIGTRAP. Patterns matched here are cached and
# reused by children, so warming the faces and sizes base graphics commonly
# uses, on a device identical to .rsb_png_device()'s, lets ordinary plots run
# without spawning threads. Text in other sizes still needs thread headroom.
.rsb_warm_graphics <- function() {
  baseline <- .rsb_thread_count()
  warm <- tempfile(fileext = ".png")
  on.exit(unlink(warm))
  tryCatch({
    .rsb_open_png(warm)
    graphics::plot(1:10, main = "warm-up", sub = "sub", xlab = "x", ylab = "y")
    for (font in 1:4) {
      for (cex in c(0.7, 0.8, 1, 1.2, 1.5, 2)) graphics::text(5, 5, "Aa", font = font, cex = cex)
    }
    grDevices::dev.off()
  }, error = function(e) {
    # A device left open here would be inherited by every child.
    try(grDevices::graphics.off(), silent = TRUE)
    warning("rsandbox: graphics warm-up failed: ", conditionMessage(e), call. = FALSE)
  })
  # Forking while a pango thread still holds a fontconfig lock would leave the
  # children's copy of that lock held forever; let them finish first.
  deadline <- Sys.time() + 2
  while (.rsb_thread_count() > baseline && Sys.time() < deadline) Sys.sleep(0.01)
}

# The graphics device modules alone (no text drawn, so no fonts loaded): a PNG
# device opened and closed.
.rsb_load_graphics <- function() {
  file <- tempfile(fileext = ".png")
  on.exit(unlink(file))
  tryCatch({
    .rsb_open_png(file)
    grDevices::dev.off()
  }, error = function(e) {
    try(grDevices::graphics.off(), silent = TRUE)
    warning("rsandbox: loading the graphics devices failed: ", conditionMessage(e), call. = FALSE)
  })
}

.rsb_thread_count <- function() {
  length(list.files("/proc/self/task"))
}

.rsb_drop_seed <- function() {
  if (exists(".Random.seed", envir = globalenv(), inherits = FALSE)) {
    rm(".Random.seed", envir = globalenv())
  }
}

# Children forked from one zygote would otherwise all inherit the same RNG
# state. Seeding from /dev/urandom keeps results unpredictable while leaving
# the user's own set.seed() fully deterministic.
.rsb_reseed <- function() {
  .rsb_drop_seed()
  seed <- tryCatch({
    con <- file("/dev/urandom", "rb", raw = TRUE)
    on.exit(close(con))
    readBin(con, "integer", n = 1L, size = 4L)
  }, error = function(e) NULL)
  # Without a seed, R seeds itself from time and pid on first use, which is
  # still distinct per child.
  if (length(seed) == 1L) set.seed(if (is.na(seed)) 0L else seed)
}

# A pre-forked child waiting idle with nobody asking for it (the supervisor's `settle`,
# see warm.rs): a collection of the young generation only. The warm-up's garbage lies in
# heap pages the warm-up itself wrote, so this child's copies of them are its own
# already; freed, those objects are the first that R's allocator hands out again, and
# the first request allocates into them instead of into pages still shared with the
# zygote, each of which costs a copy-on-write fault on the request's path (~13 µs each on
# a virtual machine). Only young objects are traced: the zygote's heap (old since its
# own gc()) is neither marked nor copied (the child's page faults stay the same), but
# the collection still reads R's tables: 0.4-1.3 ms of CPU, which is why it waits for
# an idle moment instead of being part of every child's warm-up.
rsandbox_collect_young <- function() {
  gc(full = FALSE)
  invisible(NULL)
}

# ---------------------------------------------------------------------------
# Evaluation

# The host passes each flag as "0" or "1". On a request's path: primitives (`==`, `if`,
# `$`, `length`) rather than closures of base (identical(), isTRUE()), each of which costs
# 5 000-14 000 instructions of every request (callgrind), and a field of `.rsb_state`
# written only when it changes (`.rsb_state$x <- v` is a complex assignment: ~6 000).
rsandbox_eval <- function(code, plot_dir, stream = "0", echo = "1") {
  stream <- stream == "1"
  if (.rsb_state$stream != stream) .rsb_state$stream <- stream
  .rsb_eval(code, plot_dir, echo != "0")
}

# One request, from its code to its result. Everything from parsing to the last top-level
# expression runs under one tryCatch() (an error, an interrupt) and one
# withCallingHandlers() (warnings, messages, and the calls that led to an error), and
# `phase` says what an error means where it stopped: its code's syntax, globals that do not
# decode, the user's error, or a bug in this file. Each tryCatch() handler is a level of
# R closures (measured: 12-15 µs of every request, and more on an idle machine, whose
# caches are cold); a level per step (the request, the parse, each expression) was a
# third of a `1 + 1` request's time in R. After an error, when options(error) asks R to
# go on, the next expression runs under the same handlers made again.
.rsb_eval <- function(code, plot_dir, echo) {
  # Taken first, so that a request's globals never outlive it (a syntax error included).
  request <- .rsb_request_values()
  options(rsandbox.plot_dir = plot_dir)
  if (.rsb_state$devices) .rsb_state$devices <- 0L
  # Once per child: every child draws its own numbers, while a session's later
  # evaluations continue one stream (set.seed() in one execute still governs the
  # next, as in any R session).
  if (!.rsb_state$seeded) {
    .rsb_reseed()
    .rsb_state$seeded <- TRUE
  }
  code <- enc2utf8(as.character(code))
  # What the request logs (collectors made at the first message or warning).
  if (!is.null(.rsb_state$messages)) .rsb_state$messages <- NULL
  if (!is.null(.rsb_state$warning_messages)) .rsb_state$warning_messages <- .rsb_state$warning_calls <- NULL

  phase <- "parse"
  exprs <- NULL
  refusal <- NULL
  # The code parsed again with source references, when first needed (below).
  sourced <- NULL
  i <- 0L
  value <- NULL
  visible <- FALSE
  err <- NULL
  interrupted <- FALSE
  repeat {
    # The block is evaluated in this function's frame: its assignments (`exprs`, `i`,
    # `value`...) are this frame's, and survive a condition that ends the block.
    stopped <- tryCatch({
      if (is.null(exprs)) {
        exprs <- parse(text = code, keep.source = FALSE, srcfile = NULL, encoding = "UTF-8")
        phase <- "allowlist"
        if (!is.null(.rsb_state$allowed)) refusal <- .rsb_first_offence(exprs, code)
        phase <- "globals"
        if (is.null(refusal) && length(request$globals)) .rsb_bind_globals(request$globals)
        phase <- "eval"
      }
      if (is.null(refusal)) withCallingHandlers(
        while (i < length(exprs)) {
          i <- i + 1L
          # The deferred warnings of this top-level call. (`calls` needs no reset: an
          # error that reaches the calling handler below always ends the block next.)
          if (!is.null(.rsb_state$warned)) .rsb_state$warned <- NULL
          toplevel_expr <- exprs[[i]]
          # Rscript parses each top-level expression as it reaches it, so once code sets
          # options(keep.source = TRUE) the functions it defines after that keep their
          # source. The whole code is parsed first here (a syntax error runs nothing), so
          # the expression is taken from a parse with source references instead.
          if (isTRUE(getOption("keep.source"))) {
            if (is.null(sourced)) sourced <- parse(text = code, keep.source = TRUE, encoding = "UTF-8")
            toplevel_expr <- sourced[[i]]
          }
          # As Rscript's REPL: in globalenv() (or the allowlist's environment),
          # auto-printing a visible value.
          res <- withVisible(eval(toplevel_expr, .rsb_env()))
          if (res$visible && echo) .rsb_autoprint(res$value)
          # As R's REPL: warnings() (last.warning) holds the last top-level call's warnings.
          if (length(.rsb_state$warned)) .rsb_set_last_warning(.rsb_state$warned)
          visible <- res$visible
          # Without echo, as eval() would: the last value, visible or not.
          # Boxed: the value may be the empty symbol, which cannot be bound to a name.
          if (visible || !echo) value <- list(res$value)
        },
        warning = .rsb_on_warning,
        message = .rsb_on_message,
        # Before the stack unwinds: the calls that led to the error, for traceback.
        error = .rsb_take_calls
      )
      NULL
    }, error = .rsb_stopped_by_error, interrupt = .rsb_stopped_by_interrupt)
    if (is.null(stopped)) break
    if (!is.null(stopped$interrupt)) {
      # SIGINT from the supervisor (session.interrupt, or a session's timeout):
      # the expression stops as at Ctrl-C, and the session keeps its state.
      interrupted <- TRUE
      visible <- FALSE
      break
    }
    e <- stopped$error
    if (phase == "parse") {
      return(.rsb_result(status = "syntax_error", syntax_error = .rsb_syntax_error(e)))
    }
    if (phase == "globals") {
      return(.rsb_result(status = "error", error = list(
        message = paste0("globals could not be decoded: ", .rsb_condition_message(e)), call = NA_character_)))
    }
    if (phase != "eval") {
      return(.rsb_result(status = "error", error = list(
        message = paste0("rsandbox internal error: ", .rsb_condition_message(e)), call = NA_character_)))
    }
    if (length(.rsb_state$warned)) .rsb_set_last_warning(.rsb_state$warned)
    # Made text only now, after unwinding (the error may be an allocation that failed:
    # as little as possible runs before the stack is freed), with no tryCatch of its own
    # in the handler (a nested tryCatch there crashed R after a failed allocation under a
    # tiny memory limit in a pre-forked child; daemon.rs
    # a_pre_forked_sandbox_is_the_same_sandbox_as_a_one_shot_one).
    step_error <- list(message = .rsb_condition_message(e), call = .rsb_condition_call(e),
                       trace = .rsb_error_trace(.rsb_state$calls))
    visible <- FALSE
    on_error <- getOption("error")
    if (is.null(on_error)) {
      err <- step_error
      break
    }
    # As Rscript under options(error = ...): the error is reported on stderr, the
    # option runs, and the next top-level expression follows.
    .rsb_continue_after_error(step_error, on_error)
  }
  if (!is.null(refusal)) {
    return(.rsb_result(status = "refused", error = list(message = refusal, call = NA_character_)))
  }

  # Devices buffer pages until closed; close them so the PNGs are complete
  # before the host collects the plot directory. Only when one is open (the call and
  # its try() were ~6 µs of every request), found from `.Device` (base's, which R keeps
  # current: "null device" when none is) rather than grDevices::dev.cur(), whose `::`
  # and call were ~20 000 instructions of every request.
  if (!(length(.Device) == 1L && .Device == "null device")) try(grDevices::graphics.off(), silent = TRUE)

  messages <- if (!is.null(.rsb_state$messages)) .rsb_state$messages$get()
  warning_messages <- warning_calls <- NULL
  if (!is.null(.rsb_state$warning_messages)) {
    warning_messages <- .rsb_state$warning_messages$get()
    warning_calls <- .rsb_state$warning_calls$get()
  }
  status <- if (interrupted) "interrupted"
            else if (is.null(err)) "ok"
            else .rsb_error_status(err$message, warning_messages)
  .rsb_result(
    status = status,
    # Or may have: a forked worker (parallel's mcfork, which every multicore package
    # uses) draws on devices of its own, which this process's count does not see.
    plotted = .rsb_state$devices > 0L || isNamespaceLoaded("parallel"),
    value = if (is.null(value) || is.null(value[[1]])) "null" else rsandbox_to_json(value[[1]]),
    value_typed = if (!request$typed) NULL else if (is.null(value)) "null" else rsandbox_to_typed_json(value[[1]]),
    visible = visible,
    messages = messages,
    warning_messages = warning_messages,
    warning_calls = warning_calls,
    error = err
  )
}

# The exiting handlers of .rsb_eval(): what stopped the block, boxed (a condition may
# carry both classes; the error handler, the inner one, takes it then).
.rsb_stopped_by_error <- function(e) list(error = e)
.rsb_stopped_by_interrupt <- function(i) list(interrupt = i)

# Only the calls are taken here, before unwinding (see .rsb_eval()).
.rsb_take_calls <- function(e) .rsb_state$calls <- sys.calls()

# A message and a warning as the request logs them (and streams them, when asked).
.rsb_log_message <- function(text) {
  if (is.null(.rsb_state$messages)) .rsb_state$messages <- .rsb_collector()
  .rsb_state$messages$push(text)
  if (.rsb_state$stream) .Call(.rsb_state$routines$emit, "message", text)
}

.rsb_log_warning <- function(text, call) {
  if (is.null(.rsb_state$warning_messages)) {
    .rsb_state$warning_messages <- .rsb_collector()
    .rsb_state$warning_calls <- .rsb_collector()
  }
  .rsb_state$warning_messages$push(text)
  .rsb_state$warning_calls$push(call)
  if (.rsb_state$stream) {
    shown <- if (is.na(call)) paste0("Warning message:\n", text, "\n")
             else paste0("Warning message:\nIn ", call, " : ", text, "\n")
    .Call(.rsb_state$routines$emit, "warning", shown)
  }
}

# Conditions raised directly in top-level code report the eval() call above
# as their call; Rscript reports no call for them.
.rsb_toplevel_call <- quote(eval(toplevel_expr, .rsb_env()))

# What Rscript does with a top-level error when options(error) is set: print it
# as R's default handler does ("Error in <call> : <message>", or "Error: ..."),
# then run the option (an expression or a function); an error in it is reported
# the same way and otherwise ignored.
.rsb_continue_after_error <- function(error, on_error) {
  call <- error$call
  prefix <- if (is.null(call) || is.na(call)) "Error: " else {
    p <- paste0("Error in ", call, " : ")
    first <- strsplit(error$message, "\n", fixed = TRUE)[[1L]][1L]
    # R breaks the line when call and message together are long.
    if (14L + nchar(call, type = "w") + nchar(if (is.na(first)) "" else first, type = "w") > 75L) paste0(p, "\n  ") else p
  }
  cat(prefix, error$message, "\n", sep = "", file = stderr())
  ran <- tryCatch({
    if (is.function(on_error)) on_error() else eval(on_error, .rsb_env())
    NULL
  }, error = function(e) e)
  if (inherits(ran, "error")) {
    cat("Error in options(\"error\") : ", conditionMessage(ran), "\n", sep = "", file = stderr())
  }
  invisible()
}

# At most this many calls of an error's stack travel back (the innermost ones),
# each deparsed to one line of at most .rsb_trace_width characters: text for
# the client to show, as traceback() would, never code it evaluates.
.rsb_trace_calls <- 30L
.rsb_trace_width <- 200L

# The user's calls from `calls` (sys.calls() in the error handler), outermost
# first: what came after the top-level eval(), without the handler's own frame
# and R's .handleSimpleError(). For an error raised by top-level code, the
# call that raised it (`stop("top")`), as traceback() shows it.
.rsb_error_trace <- function(calls) {
  if (is.null(calls)) return(character())
  tops <- which(vapply(calls, identical, logical(1), .rsb_toplevel_call))
  if (length(tops) == 0L) return(character())
  calls <- calls[-seq_len(max(tops))]
  calls <- calls[-length(calls)]
  while (length(calls) && identical(calls[[length(calls)]][[1L]], quote(.handleSimpleError))) {
    calls <- calls[-length(calls)]
  }
  # A warning made an error (options(warn = 2)): R's own signalling frames from
  # .signalSimpleWarning on are machinery, not the user's calls.
  signalled <- which(vapply(calls, function(call) identical(call[[1L]], quote(.signalSimpleWarning)), logical(1)))
  if (length(signalled)) calls <- calls[seq_len(signalled[1L] - 1L)]
  calls <- utils::tail(calls, .rsb_trace_calls)
  vapply(calls, function(call) {
    line <- paste(deparse(call, width.cutoff = 200L, nlines = 1L), collapse = "")
    if (nchar(line) > .rsb_trace_width) paste0(substr(line, 1L, .rsb_trace_width - 3L), "...") else line
  }, character(1), USE.NAMES = FALSE)
}

.rsb_on_warning <- function(w) {
  # A warning condition raised with signalCondition() has no muffle restart
  # and R would not display it, so neither do we.
  if (is.null(findRestart("muffleWarning"))) return(invisible())
  warn <- suppressWarnings(as.integer(getOption("warn", 0L))[1L])
  if (is.na(warn)) warn <- 0L
  # warn >= 2: decline, so R's default handler turns it into an error that
  # the enclosing tryCatch records, as Rscript would.
  if (warn >= 2L) return(invisible())
  if (warn >= 0L) {
    .rsb_log_warning(.rsb_condition_message(w), .rsb_condition_call(w))
    # As R: only deferred warnings (warn = 0) are kept, at most getOption("nwarnings").
    keep <- suppressWarnings(as.integer(getOption("nwarnings", 50L))[1L])
    if (warn == 0L && !is.na(keep) && length(.rsb_state$warned) < keep) {
      .rsb_state$warned[length(.rsb_state$warned) + 1L] <- list(conditionCall(w))
      names(.rsb_state$warned)[length(.rsb_state$warned)] <- .rsb_condition_message(w)
    }
  }
  invokeRestart("muffleWarning")
}

# R itself adds last.warning to the base environment (R code may only change an
# existing binding there): printing a deferred warning once makes it, then it is
# emptied (warnings() is then empty until code warns).
.rsb_define_last_warning <- function() {
  if (exists("last.warning", envir = baseenv(), inherits = FALSE)) return(invisible())
  sink(file(nullfile(), open = "w"), type = "message")
  on.exit(sink(type = "message"))
  old <- options(warn = 0L)
  on.exit(options(old), add = TRUE)
  warning("rsandbox", call. = FALSE)
  .Internal(printDeferredWarnings())
  .rsb_set_last_warning(list())
}

# R keeps the deferred warnings of the last top-level call in base's last.warning (a
# list of calls named by the messages, at most 50), which warnings() shows.
.rsb_set_last_warning <- function(warned) {
  tryCatch(assign("last.warning", warned, envir = baseenv()), error = function(e) NULL)
}

.rsb_on_message <- function(m) {
  if (is.null(findRestart("muffleMessage"))) return(invisible())
  .rsb_log_message(.rsb_condition_message(m))
  invokeRestart("muffleMessage")
}

# Rscript auto-prints through base::print (show() for S4), called from an
# environment whose parent is globalenv(), so S3 methods the user defined in
# globalenv() are dispatched. A local print binding keeps a user-defined
# `print` function from replacing the generic.
# Primitives only: they take the value without binding it to a name.
.rsb_is_empty_symbol <- function(x) is.symbol(x) && !nzchar(as.character(x))

.rsb_autoprint <- function(x) {
  # The empty symbol (quote(expr = )) is a value R can return; once bound to a name it
  # reads as a missing argument. R prints it as an empty line.
  if (.rsb_is_empty_symbol(x)) return(invisible(cat("\n")))
  # As R's REPL (PrintValueEnv): a value that is neither an object nor a function is
  # printed as it is, without dispatch (Rscript ignores a user's print.numeric or
  # print.list for `2` or `list(1)`), so also without the environment below (~75 000
  # instructions of every request that prints).
  if (!is.object(x) && !is.function(x)) return(invisible(print.default(x)))
  env <- new.env(parent = globalenv())
  env$x <- x
  if (isS4(x)) {
    env$show <- methods::show
    eval(quote(show(x)), env)
  } else {
    # base's print: this file's parent is baseenv(), whose bindings code cannot change
    # (`base::print` looked it up again on every request).
    env$print <- print
    eval(quote(print(x)), env)
  }
  invisible()
}

.rsb_condition_message <- function(cond) {
  msg <- tryCatch(conditionMessage(cond), error = function(e) "<unprintable condition message>")
  paste(as.character(msg), collapse = "\n")
}

# NA_character_ stands for "no call" (JSON null).
.rsb_condition_call <- function(cond) {
  call <- tryCatch(conditionCall(cond), error = function(e) NULL)
  if (is.null(call) || identical(call, .rsb_toplevel_call)) return(NA_character_)
  # Calls built by do.call() can embed whole data sets; keep them readable.
  paste(deparse(call, nlines = 20L), collapse = "\n")
}

# Observed in R 4.2 under a low RLIMIT_NPROC:
#   mcparallel()/mclapply():  "unable to fork, possible reason: Resource temporarily unavailable"
#   system(intern = TRUE), system2(stdout = TRUE):
#                             "cannot popen '<cmd>', probable reason 'Cannot allocate memory'"
#   readLines(pipe(...)):     error "cannot open the connection", with the reason in
#                             a warning "cannot open pipe() cmd '<cmd>': Cannot allocate memory"
#   makeForkCluster():        "Cluster setup failed."
# (system() without intern only warns "error in running command" and returns 127.)
# Fork failures are checked first because a failed popen reports ENOMEM.
.rsb_process_pattern <- paste(
  "unable to fork", "cannot popen", "cannot open pipe\\(\\)",
  "Cluster setup failed", "Resource temporarily unavailable",
  sep = "|"
)
# R's own allocation failures ("cannot allocate vector of size ..." is what
# nearly everything gives under RLIMIT_AS; strrep() and other C code give
# "'R_Calloc' could not allocate memory (...)"; also "cannot allocate memory
# block of size ...", "vector memory exhausted (limit reached?)"),
# strerror(ENOMEM) and C++ std::bad_alloc from compiled code.
.rsb_memory_pattern <- paste(
  "^cannot allocate (vector|memory|buffer)", "could not (re-)?allocate memory",
  "memory exhausted", "out[- ]of[- ]memory", "cannot allocate memory",
  "failed to (re)?alloc", "bad_alloc",
  sep = "|"
)

.rsb_error_status <- function(message, warnings) {
  text <- message
  # Connection errors are generic; R puts the actual reason in a warning.
  if (identical(message, "cannot open the connection") && length(warnings) > 0L) {
    text <- c(text, warnings[length(warnings)])
  }
  if (any(grepl(.rsb_process_pattern, text, ignore.case = TRUE))) return("process_limit")
  if (any(grepl(.rsb_memory_pattern, text, ignore.case = TRUE))) return("memory_limit")
  "error"
}

# With srcfile = NULL, R 4.2 parse errors read "2:3: unexpected symbol\n1: ...";
# with a srcfile they carry a "<text>:" prefix. Lexer errors such as
# "'\q' is an unrecognized escape ..." carry no position at all, and a few
# ("repeated formal argument 'x' on line 1") only a line.
.rsb_syntax_error <- function(e) {
  msg <- .rsb_condition_message(e)
  line <- NA_integer_
  column <- NA_integer_
  pos <- regmatches(msg, regexec("^(?:<text>:)?([0-9]+):([0-9]+):", msg, perl = TRUE))[[1L]]
  if (length(pos) == 3L) {
    line <- as.integer(pos[2L])
    column <- as.integer(pos[3L])
  } else {
    pos <- regmatches(msg, regexec("(?:at|on) line ([0-9]+)", msg, perl = TRUE))[[1L]]
    if (length(pos) == 2L) line <- as.integer(pos[2L])
  }
  list(message = msg, line = line, column = column)
}

# Append-only character buffer. Modifying the closure's own variables with
# `<<-` happens in place, so n pushes cost O(n) rather than O(n^2).
.rsb_collector <- function() {
  buf <- character(16L)
  n <- 0L
  list(
    push = function(x) {
      n <<- n + 1L
      if (n > length(buf)) length(buf) <<- 2L * length(buf)
      buf[n] <<- x
      invisible()
    },
    get = function() buf[seq_len(n)]
  )
}

# The result of a request (the keys at the top of this file). Built with primitives and
# one paste0() in the common case (nothing logged, no error): this function was ~85 000
# instructions of a `1 + 1` request, most of them calls of closures (isTRUE(),
# character() for each default, a paste0() of twenty pieces).
.rsb_result <- function(status, value = "null", visible = FALSE,
                        messages = NULL, warning_messages = NULL,
                        warning_calls = NULL, error = NULL,
                        syntax_error = NULL, value_typed = NULL, plotted = NA) {
  logged <- if (!length(messages) && !length(warning_messages)) ",\"messages\":[],\"warnings\":[]" else {
    warnings <- if (!length(warning_messages)) "[]" else .rsb_json_array(paste0(
      "{\"message\":", .rsb_json_strings(warning_messages), ",\"call\":", .rsb_json_strings(warning_calls), "}"))
    paste0(",\"messages\":", if (length(messages)) .rsb_json_array(.rsb_json_strings(messages)) else "[]",
           ",\"warnings\":", warnings)
  }
  failed <- if (is.null(error) && is.null(syntax_error)) ",\"error\":null,\"syntax_error\":null" else {
    error_json <- if (is.null(error)) "null" else {
      trace <- if (length(error$trace) == 0L) "" else
        paste0(",\"trace\":[", paste(.rsb_json_strings(error$trace), collapse = ","), "]")
      paste0("{\"message\":", .rsb_json_strings(error$message),
             ",\"call\":", .rsb_json_strings(error$call), trace, "}")
    }
    syntax_json <- if (is.null(syntax_error)) "null" else {
      paste0("{\"message\":", .rsb_json_strings(syntax_error$message),
             ",\"line\":", .rsb_json_integers(syntax_error$line),
             ",\"column\":", .rsb_json_integers(syntax_error$column), "}")
    }
    paste0(",\"error\":", error_json, ",\"syntax_error\":", syntax_json)
  }
  enc2utf8(paste0(
    # A word of this file's (ASCII, nothing to escape): quoted without the string
    # encoder, whose checks cost more than the rest of a small result.
    "{\"status\":\"", status, "\",\"value\":", value,
    if (!is.null(value_typed)) paste0(",\"value_typed\":", value_typed),
    if (visible) ",\"visible\":true" else ",\"visible\":false",
    logged, failed,
    if (is.na(plotted)) "}" else if (plotted) ",\"plotted\":true}" else ",\"plotted\":false}"
  ))
}

# ---------------------------------------------------------------------------
# JSON encoding (rules at the top of this file)

rsandbox_to_json <- function(x) {
  # The commonest of all, one plain finite double that 15 digits hold, as
  # .rsb_json_doubles() writes it, without its two calls (~10 000 instructions).
  if (is.double(x) && length(x) == 1L && is.null(attributes(x)) && is.finite(x)) {
    s <- sprintf("%.15g", x)
    if (as.numeric(s) == x) return(s)
  }
  # The most common value, one plain number, logical or string: its encoder directly,
  # without the dispatch below and its tryCatch(), which were ~100 000 instructions of a
  # `1 + 1` request.
  scalar <- .rsb_json_scalar(x)
  if (!is.null(scalar)) return(scalar)
  # A tool call's arguments, mostly: names and plain scalars.
  record <- .rsb_json_record(x)
  if (!is.null(record)) return(record)
  # The empty symbol: a symbol that prints as nothing.
  if (.rsb_is_empty_symbol(x)) return('{"class":["name"],"printed":""}')
  # Without a class anywhere (a vector, a matrix, a flat list of vectors: most values
  # and every tool call's arguments) nothing user-defined runs and the encoders cannot
  # fail, so no tryCatch() (~40 000 instructions).
  if (!is.object(x) && (is.atomic(x) || is.list(x) && .rsb_flat_plain(x))) return(enc2utf8(.rsb_json(x, 0L)))
  out <- tryCatch(.rsb_json(x, 0L), error = function(e) NULL)
  if (is.character(out) && length(out) == 1L && !is.na(out)) return(enc2utf8(out))
  .rsb_json_printed(x)
}

# One plain scalar (length one and no attributes, so no class, names or dims) by its
# encoder, which cannot fail; NULL for any other value.
.rsb_json_scalar <- function(x) {
  if (length(x) != 1L || !is.null(attributes(x))) return(NULL)
  switch(typeof(x),
    double = .rsb_json_doubles(x),
    integer = .rsb_json_integers(x),
    logical = .rsb_json_logicals(x),
    character = .rsb_json_strings(x),
    NULL
  )
}

.rsb_json <- function(x, depth) {
  # A list's element, a tool's argument: mostly one plain scalar.
  scalar <- .rsb_json_scalar(x)
  if (!is.null(scalar)) return(scalar)
  if (is.null(x)) return("null")
  if (depth > .rsb_max_depth) return(.rsb_json_printed(x))
  # Only an object (a class attribute) can be a data frame, factor or date-time.
  if (is.object(x)) {
    if (is.data.frame(x)) return(.rsb_json_array(.rsb_json_records(x, depth)))
    if (.rsb_is_vectorlike_class(x)) return(.rsb_json_shape(.rsb_json_elements(x, depth), names(x)))
    return(.rsb_json_printed(x))
  }
  if (is.atomic(x) && !is.raw(x) || is.list(x)) {
    if (typeof(x) == "pairlist") x <- as.list(x)
    d <- dim(x)
    if (length(d) >= 2L) return(.rsb_json_nested(.rsb_json_elements(x, depth), d))
    elements <- .rsb_json_elements(x, depth)
    if (is.list(x)) {
      return(if (.rsb_all_named(names(x))) .rsb_json_object(elements, names(x))
             else .rsb_json_array(elements))
    }
    return(.rsb_json_shape(elements, names(x)))
  }
  .rsb_json_printed(x)
}

# A list with names and no other attribute, every element one plain scalar, as
# .rsb_json() writes it (an object), without its dispatch per element and per name
# (`list(x = 1)`: ~198 000 -> ~149 000 instructions); NULL for any other value.
.rsb_json_record <- function(x) {
  if (!is.list(x) || is.object(x) || length(attributes(x)) != 1L) return(NULL)
  keys <- names(x)
  if (!.rsb_all_named(keys)) return(NULL)
  values <- character(length(x))
  for (i in seq_along(x)) {
    value <- .rsb_json_scalar(x[[i]])
    if (is.null(value)) return(NULL)
    values[i] <- value
  }
  enc2utf8(.rsb_json_object(values, keys))
}

# A list whose elements are all vectors without a class.
.rsb_flat_plain <- function(x) {
  for (element in x) if (is.object(element) || !is.atomic(element)) return(FALSE)
  TRUE
}

# Classed vectors that are encoded as their values rather than printed.
.rsb_is_vectorlike_class <- function(x) {
  is.factor(x) || inherits(x, "Date") || inherits(x, "POSIXct") || inherits(x, "POSIXlt")
}

.rsb_all_named <- function(nms) {
  !is.null(nms) && !anyNA(nms) && all(nzchar(nms))
}

# Scalar/array/object rule for atomic vectors.
.rsb_json_shape <- function(elements, nms) {
  if (.rsb_all_named(nms) && length(nms) == length(elements)) {
    return(.rsb_json_object(elements, nms))
  }
  if (length(elements) == 1L && is.null(nms)) return(elements)
  .rsb_json_array(elements)
}

.rsb_json_array <- function(elements) {
  paste0("[", paste(elements, collapse = ","), "]")
}

.rsb_json_object <- function(elements, nms) {
  if (length(elements) == 0L) return("{}")
  paste0("{", paste0(.rsb_json_strings(nms), ":", elements, collapse = ","), "}")
}

# One JSON text per element of x (x is a vector, factor, date-time or list;
# used both for top-level vectors and for data frame columns).
.rsb_json_elements <- function(x, depth) {
  if (is.object(x)) {
    if (is.factor(x)) return(.rsb_json_strings(as.character(x)))
    if (inherits(x, "Date")) return(.rsb_json_strings(format(x, "%Y-%m-%d")))
    # Before is.list(): a POSIXlt is a list.
    if (inherits(x, "POSIXt")) return(.rsb_json_strings(.rsb_iso_datetime(x)))
  }
  if (is.list(x)) {
    return(vapply(x, function(el) .rsb_json(el, depth + 1L), character(1L),
                  USE.NAMES = FALSE))
  }
  if (is.object(x)) {
    # Other classed columns of a data frame (difftime, ...): their formatted text.
    s <- trimws(format(x))
    s[is.na(x)] <- NA_character_
    return(.rsb_json_strings(s))
  }
  switch(typeof(x),
    logical = .rsb_json_logicals(x),
    integer = .rsb_json_integers(x),
    double = .rsb_json_doubles(x),
    character = .rsb_json_strings(x),
    complex = .rsb_json_strings(ifelse(is.na(x), NA_character_, as.character(x))),
    raw = .rsb_json_strings(as.character(x)),
    stop("cannot encode elements of type ", typeof(x))
  )
}

.rsb_iso_datetime <- function(x) {
  s <- format(as.POSIXct(x), "%Y-%m-%dT%H:%M:%S%z")
  # strftime's %z is "+0100"; ISO 8601 / RFC 3339 extended form is "+01:00".
  sub("([+-][0-9]{2})([0-9]{2})$", "\\1:\\2", s)
}

.rsb_json_logicals <- function(x) {
  out <- ifelse(x, "true", "false")
  out[is.na(x)] <- "null"
  as.character(out)
}

.rsb_json_integers <- function(x) {
  out <- as.character(as.integer(x))
  out[is.na(x)] <- "null"
  out
}

.rsb_json_doubles <- function(x) {
  x <- as.double(x)
  # The common case, one finite number that 15 digits hold, without the vector work.
  if (length(x) == 1L && is.finite(x)) {
    s <- sprintf("%.15g", x)
    if (as.numeric(s) == x) return(s)
  }
  out <- character(length(x))
  finite <- is.finite(x)
  if (any(finite)) {
    v <- x[finite]
    # sprintf() always uses "." as decimal mark: R keeps LC_NUMERIC at "C".
    s <- sprintf("%.15g", v)
    for (digits in c(16L, 17L)) {
      lossy <- as.numeric(s) != v
      if (!any(lossy)) break
      s[lossy] <- sprintf("%.*g", digits, v[lossy])
    }
    out[finite] <- s
  }
  out[is.na(x)] <- "null"
  out[is.nan(x)] <- "\"NaN\""
  out[!is.na(x) & x == Inf] <- "\"Inf\""
  out[!is.na(x) & x == -Inf] <- "\"-Inf\""
  out
}

.rsb_json_strings <- function(x) {
  x <- as.character(x)
  if (length(x) == 0L) return(character())
  missing <- is.na(x)
  x <- enc2utf8(x)
  broken <- !missing & !validUTF8(x)
  if (any(broken)) x[broken] <- iconv(x[broken], "UTF-8", "UTF-8", sub = "\uFFFD")
  # Most strings need no escaping. A few short strings (names, most values) are
  # checked by their code points, all at once; grepl() compiles its pattern on every
  # call (~100 000 instructions), so it looks only at long or many strings and at
  # strings that have something to escape.
  text <- if (length(x) == 1L) x else if (length(x) <= 64L) paste(x[!missing], collapse = "") else NA
  special <- if (!is.na(text) && nchar(text, "bytes") <= 4096L) {
    points <- utf8ToInt(text)
    any(points < 32L | points == 34L | points == 92L)
  } else TRUE
  if (special) {
    special <- !missing & grepl("[\001-\037\"\\\\]", x, perl = TRUE)
    if (any(special)) x[special] <- .rsb_json_escape(x[special])
  }
  out <- sprintf("\"%s\"", x)
  if (any(missing)) out[missing] <- "null"
  out
}

.rsb_json_escape <- function(x) {
  x <- gsub("\\", "\\\\", x, fixed = TRUE)
  x <- gsub("\"", "\\\"", x, fixed = TRUE)
  x <- gsub("\n", "\\n", x, fixed = TRUE)
  x <- gsub("\r", "\\r", x, fixed = TRUE)
  x <- gsub("\t", "\\t", x, fixed = TRUE)
  x <- gsub("\b", "\\b", x, fixed = TRUE)
  x <- gsub("\f", "\\f", x, fixed = TRUE)
  ctrl <- grepl("[\001-\037]", x, perl = TRUE)
  if (any(ctrl)) {
    sub <- x[ctrl]
    hits <- gregexpr("[\001-\037]", sub, perl = TRUE)
    regmatches(sub, hits) <- lapply(regmatches(sub, hits), function(chars) {
      sprintf("\\u%04x", vapply(chars, utf8ToInt, integer(1L), USE.NAMES = FALSE))
    })
    x[ctrl] <- sub
  }
  x
}

# Matrices and arrays: `elements` is in R's column-major order with dims `d`;
# the output nests by the first index outermost, so a matrix is a list of rows.
.rsb_json_nested <- function(elements, d) {
  if (length(d) == 1L) return(.rsb_json_array(elements))
  if (length(d) == 2L) {
    nr <- d[1L]
    nc <- d[2L]
    if (nr == 0L) return("[]")
    rows <- if (nc == 0L) rep("[]", nr) else {
      cols <- lapply(seq_len(nc), function(j) elements[(j - 1L) * nr + seq_len(nr)])
      paste0("[", do.call(paste, c(cols, sep = ",")), "]")
    }
    return(.rsb_json_array(rows))
  }
  inner <- prod(d[-1L])
  slices <- vapply(seq_len(d[1L]), function(i) {
    .rsb_json_nested(elements[i + d[1L] * (seq_len(inner) - 1L)], d[-1L])
  }, character(1L))
  .rsb_json_array(slices)
}

# One JSON object per data frame row, built column-wise so that cost grows
# with the number of columns, not rows.
.rsb_json_records <- function(df, depth) {
  n <- nrow(df)
  if (n == 0L) return(character())
  columns <- lapply(df, .rsb_json_column, n = n, depth = depth)
  keys <- names(df)
  row_names <- attr(df, "row.names")
  if (is.character(row_names)) {
    columns <- c(list(.rsb_json_strings(row_names)), columns)
    keys <- c("_row", keys)
  }
  if (length(columns) == 0L) return(rep("{}", n))
  pairs <- Map(function(key, values) paste0(key, ":", values),
               .rsb_json_strings(keys), columns)
  paste0("{", do.call(paste, c(unname(pairs), sep = ",")), "}")
}

.rsb_json_column <- function(col, n, depth) {
  out <- if (is.data.frame(col)) {
    .rsb_json_records(col, depth + 1L)
  } else if (length(dim(col)) == 2L && !is.object(col)) {
    # A matrix column contributes one row array per data frame row.
    vapply(seq_len(n), function(i) .rsb_json_array(.rsb_json_elements(col[i, ], depth)),
           character(1L))
  } else {
    .rsb_json_elements(col, depth)
  }
  if (length(out) != n) stop("data frame column does not have one value per row")
  out
}

.rsb_json_printed <- function(x) {
  tryCatch({
    cls <- tryCatch(as.character(class(x)), error = function(e) character())
    printed <- tryCatch(
      suppressWarnings(suppressMessages(
        utils::capture.output(.rsb_autoprint(x))
      )),
      error = function(e) paste0("<print() failed: ", .rsb_condition_message(e), ">")
    )
    printed <- enc2utf8(paste(printed, collapse = "\n"))
    if (!validUTF8(printed)) printed <- iconv(printed, "UTF-8", "UTF-8", sub = "\uFFFD")
    if (nchar(printed) > .rsb_max_printed) {
      printed <- substr(printed, 1L, .rsb_max_printed)
    }
    paste0("{\"class\":", .rsb_json_array(.rsb_json_strings(cls)),
           ",\"printed\":", .rsb_json_strings(printed), "}")
  }, error = function(e) "{\"class\":[],\"printed\":\"\"}")
}

# ---------------------------------------------------------------------------
# Snapshots: the global environment and the attached packages' names, written
# with serialize() to a file in the workspace. Produced and read only inside a
# sandbox; the host treats the bytes as opaque.

# Objects that would not mean the same thing elsewhere: connections, and
# anything holding an external pointer or a weak reference (serialize() calls
# the refhook for those).
.rsb_cannot_travel <- function(x) {
  if (inherits(x, "connection")) return(TRUE)
  found <- FALSE
  tryCatch(
    serialize(x, NULL, refhook = function(ref) { found <<- TRUE; NULL }),
    error = function(e) found <<- TRUE
  )
  found
}

# Returns the names left out, one per line (character(0) when none).
rsandbox_snapshot <- function(file) {
  env <- .rsb_env()
  # Host tools are the session's own (their locked stubs are made afresh).
  names <- sort(setdiff(ls(env, all.names = TRUE), .rsb_tool_names()))
  # An active binding is code, run on every read: not read, so not saved. (Promises
  # are forced, as R's own save() forces them; the supervisor drives this request as
  # an evaluation: deadline, meter, and clean-up afterwards.)
  active <- vapply(names, bindingIsActive, logical(1), env = env)
  objects <- mget(names[!active], envir = env)
  bad <- c(vapply(objects, .rsb_cannot_travel, logical(1)), stats::setNames(active[active], names[active]))
  names <- c(names[!active], names[active])
  packages <- sub("^package:", "", grep("^package:", search(), value = TRUE))
  snapshot <- list(format = "rsandbox-snapshot-1", objects = objects[!bad],
                   packages = rev(packages))
  con <- file(file, open = "wb")
  on.exit(close(con))
  serialize(snapshot, con, xdr = TRUE)
  names[bad]
}

# Attaches the snapshot's packages (in their original order), then assigns its
# objects in globalenv(). Returns the warnings, one per element.
rsandbox_restore <- function(file) {
  con <- file(file, open = "rb")
  on.exit(close(con))
  snapshot <- unserialize(con)
  if (!is.list(snapshot) || !identical(snapshot$format, "rsandbox-snapshot-1"))
    stop("not an rsandbox snapshot")
  warnings <- character()
  attached <- sub("^package:", "", grep("^package:", search(), value = TRUE))
  for (pkg in setdiff(as.character(snapshot$packages), attached)) {
    ok <- tryCatch(suppressPackageStartupMessages(
      library(pkg, character.only = TRUE, quietly = TRUE)), error = function(e) NULL)
    if (is.null(ok)) warnings <- c(warnings, paste0("package ", pkg, " could not be attached"))
  }
  objects <- snapshot$objects
  for (name in names(objects)) {
    if (exists(name, envir = .rsb_env(), inherits = FALSE) && bindingIsLocked(name, .rsb_env())) {
      warnings <- c(warnings, paste0(name, " is a host tool in this session: not restored"))
    } else {
      assign(name, objects[[name]], envir = .rsb_env())
    }
  }
  warnings
}

# ---------------------------------------------------------------------------
# The function allowlist (a profile's `functions`): a convenience over the
# kernel's walls, not one of them. Code runs in an environment whose parents
# hold only the allowed bindings and then nothing (emptyenv()), so names,
# strings (get, match.fun, do.call) and environment walking find nothing else;
# before it runs, a pass over the parsed code refuses the first call of a
# function that is neither allowed nor defined by the code itself.

# Where user code runs: globalenv(), or the allowlist's environment.
.rsb_env <- function() {
  if (is.null(.rsb_state$user_env)) globalenv() else .rsb_state$user_env
}

# What allowed R functions call by building `pkg::name(...)` and evaluating it
# where the user's code runs: model.frame for the modelling functions (lm, glm,
# aov, the formula methods of t.test, aggregate, boxplot, xtabs, ...), which only
# evaluates the formula's variables, there; write.table for write.csv, which
# does no more than write.csv itself.
.rsb_plumbing <- c("model.frame", "model.frame.default", "write.table")

# A `::` for the allowlist's environment: `pkg::name` only for the allowed
# functions and the plumbing above, so that a modelling function's own call
# works while a name by string (`"::"("base", "system")`) still reaches nothing.
# Its enclosure is the base environment (whose parent is empty), not the
# global environment.
.rsb_guarded_colons <- function(reachable) {
  enclosure <- new.env(parent = baseenv())
  enclosure$reachable <- reachable
  colons <- function(pkg, name) {
    pkg <- as.character(substitute(pkg))
    name <- as.character(substitute(name))
    if (length(pkg) != 1L || length(name) != 1L || !(name %in% reachable))
      stop(sprintf("%s::%s is not in the function allowlist", paste(pkg, collapse = ""), paste(name, collapse = "")), call. = FALSE)
    getExportedValue(pkg, name)
  }
  environment(colons) <- enclosure
  colons
}

# `names`: one per line. Set once per child; the profile does not change.
rsandbox_allow <- function(names) {
  if (!is.null(.rsb_state$allowed)) return(invisible(character()))
  names <- strsplit(names, "\n", fixed = TRUE)[[1]]
  allowed <- new.env(parent = emptyenv())
  missing <- character()
  for (name in names) {
    if (exists(name, envir = globalenv())) assign(name, get(name, envir = globalenv()), envir = allowed)
    else missing <- c(missing, name)
  }
  # Host tools are the operator's: always callable.
  if ("rsandbox:tools" %in% search()) {
    tools <- as.environment("rsandbox:tools")
    for (name in ls(tools, all.names = TRUE)) assign(name, get(name, envir = tools), envir = allowed)
  }
  assign("::", .rsb_guarded_colons(c(ls(allowed, all.names = TRUE), .rsb_plumbing)), envir = allowed)
  lockEnvironment(allowed, bindings = TRUE)
  .rsb_state$allowed <- c(ls(allowed, all.names = TRUE))
  .rsb_state$user_env <- new.env(parent = allowed)
  .rsb_lock_tools(.rsb_state$user_env)
  invisible(missing)
}

# The first call (or reference) of a function the allowlist does not have, as a
# message with its line and column; NULL when there is none.
.rsb_first_offence <- function(exprs, code) {
  allowed <- .rsb_state$allowed
  defined <- character()
  is_gap <- function(x) identical(x, quote(expr = ))
  # The names the code itself binds (assignments, loop variables, formals).
  walk_defs <- function(e) {
    if (!is.call(e)) return(invisible())
    head <- e[[1]]
    if (is.symbol(head)) {
      h <- as.character(head)
      if (h %in% c("<-", "=", "<<-") && length(e) >= 2 && is.symbol(e[[2]])) defined <<- c(defined, as.character(e[[2]]))
      if (h == "for" && is.symbol(e[[2]])) defined <<- c(defined, as.character(e[[2]]))
      if (h == "function") defined <<- c(defined, names(e[[2]]))
    }
    for (i in seq_along(e)) if (!is_gap(e[[i]])) walk_defs(e[[i]])
  }
  for (e in exprs) walk_defs(e)
  ok <- c(allowed, defined)
  offending <- character()
  walk_uses <- function(e) {
    if (is.symbol(e)) {
      name <- as.character(e)
      if (nzchar(name) && !(name %in% ok) && exists(name, envir = globalenv(), mode = "function")) offending <<- c(offending, name)
      return(invisible())
    }
    if (!is.call(e)) return(invisible())
    head <- e[[1]]
    if (is.symbol(head)) {
      h <- as.character(head)
      if (!(h %in% ok)) offending <<- c(offending, h)
    } else if (!is_gap(head)) {
      walk_uses(head)
    }
    args <- as.list(e)[-1]
    # `x$name` and `x@name`: the name is a field, not a function.
    if (is.symbol(head) && as.character(head) %in% c("$", "@") && length(args) == 2) args <- args[1]
    for (i in seq_along(args)) if (!is_gap(args[[i]])) walk_uses(args[[i]])
  }
  for (e in exprs) walk_uses(e)
  if (!length(offending)) return(NULL)
  # Where: the first token spelling an offending name.
  data <- utils::getParseData(parse(text = code, keep.source = TRUE), includeText = TRUE)
  tokens <- data[data$terminal & data$text %in% offending, , drop = FALSE]
  tokens <- tokens[order(tokens$line1, tokens$col1), , drop = FALSE]
  name <- if (nrow(tokens)) tokens$text[1] else offending[1]
  where <- if (nrow(tokens)) sprintf("line %d, column %d", tokens$line1[1], tokens$col1[1]) else "somewhere"
  sprintf("`%s` (%s) is not in the profile's function allowlist", name, where)
}

# ---------------------------------------------------------------------------
# Typed values: R values as data, both ways (docs/protocol.md, "Values"). A request's
# `globals` arrive as the typed encoding already turned into plain R lists and vectors
# by the child (`.Call("rsandbox_request_values")`: JSON arrays of numbers, strings or
# booleans are vectors with NA for null, other arrays lists, objects named lists); they
# are rebuilt here with structure() and as.Date() -- never parse() or eval() -- and bound
# in the code's environment. `typed: true` asks for the value encoded the same way
# (`value_typed`). Supported: NULL; logical, integer, double and character vectors with
# names, or with dim and dimnames (matrices, arrays); factors (ordered too); Date;
# POSIXct; data frames of class "data.frame" (row names kept); lists of these. Other
# attributes are dropped; anything else (functions, environments, other classes,
# complex, raw) encodes as {"type":"unsupported","class":[...]}.

.rsb_typed_max_depth <- 64L

.rsb_request_values <- function() {
  # No routines: eval.R on its own (tests/eval_unit.R), without the host. No tryCatch()
  # around the call (~40 000 instructions of every request): it fails only where nothing
  # can be allocated, and then the request is an error, not one without its globals.
  if (is.null(.rsb_state$routines)) return(list(globals = NULL, typed = FALSE))
  .Call(.rsb_state$routines$request_values)
}

# All decoded before any is bound: a request's globals are bound all or none.
.rsb_bind_globals <- function(globals) {
  if (!is.list(globals) || !.rsb_all_named(names(globals))) stop("globals must be named values")
  values <- lapply(globals, .rsb_from_typed, depth = 0L)
  env <- .rsb_env()
  for (i in seq_along(values)) assign(names(globals)[i], values[[i]], envir = env)
  invisible(NULL)
}

.rsb_from_typed <- function(node, depth) {
  if (depth > .rsb_typed_max_depth) stop("nested too deeply")
  type <- if (is.list(node)) node[["type"]]
  if (!is.character(type) || length(type) != 1L || is.na(type)) stop("a value must be an object with a \"type\"")
  x <- switch(type,
    null = return(NULL),
    logical = , integer = , double = , character = {
      x <- .rsb_typed_atomic(node[["value"]], type)
      if (!is.null(node[["dim"]])) {
        dim(x) <- .rsb_typed_atomic(node[["dim"]], "integer")
        dn <- node[["dimnames"]]
        if (!is.null(dn)) {
          dimnames(x) <- lapply(if (is.list(dn)) dn else as.list(dn),
                                function(d) if (is.null(d)) NULL else .rsb_typed_atomic(d, "character"))
        }
      }
      x
    },
    factor = {
      levels <- .rsb_typed_atomic(node[["levels"]], "character")
      codes <- .rsb_typed_atomic(node[["codes"]], "integer")
      if (anyNA(levels) || anyDuplicated(levels)) stop("factor levels must be distinct strings")
      if (any(!is.na(codes) & (codes < 1L | codes > length(levels)))) stop("factor code out of range")
      structure(codes, levels = levels, class = if (isTRUE(node[["ordered"]])) c("ordered", "factor") else "factor")
    },
    Date = {
      s <- .rsb_typed_atomic(node[["value"]], "character")
      bad <- !is.na(s) & !grepl("^[0-9]{4}-[0-9]{2}-[0-9]{2}$", s)
      if (any(bad)) stop("a Date must be YYYY-MM-DD")
      as.Date(s, format = "%Y-%m-%d")
    },
    POSIXct = {
      tz <- node[["tz"]]
      if (!is.null(tz) && !(is.character(tz) && length(tz) == 1L)) stop("tz must be a string")
      .POSIXct(.rsb_typed_atomic(node[["value"]], "double"), tz = tz)
    },
    list = {
      items <- node[["value"]]
      if (!is.list(items)) stop("a list's value must be an array of values")
      lapply(items, .rsb_from_typed, depth = depth + 1L)
    },
    data.frame = {
      columns <- node[["columns"]]
      if (!is.list(columns)) stop("a data frame's columns must be an array of values")
      columns <- lapply(columns, .rsb_from_typed, depth = depth + 1L)
      nms <- .rsb_typed_atomic(node[["names"]], "character")
      n <- .rsb_typed_atomic(node[["nrow"]], "integer")
      if (length(n) != 1L || is.na(n) || n < 0L) stop("nrow must be a whole number")
      if (length(nms) != length(columns)) stop("one name per column")
      rows <- vapply(columns, function(col) if (is.data.frame(col)) nrow(col) else NROW(col), integer(1))
      if (any(rows != n)) stop("every column has one value per row")
      rn <- node[["row_names"]]
      rn <- if (is.null(rn)) .set_row_names(n)
            else if (is.character(rn)) rn else .rsb_typed_atomic(rn, "integer")
      if (length(rn) != n && !is.null(node[["row_names"]])) stop("one row name per row")
      return(structure(columns, names = nms, row.names = rn, class = "data.frame"))
    },
    stop(sprintf("unknown type \"%s\"", type))
  )
  if (!is.null(node[["names"]])) names(x) <- .rsb_typed_atomic(node[["names"]], "character")
  x
}

# A JSON array (as the child converted it) as an atomic vector of `type`.
.rsb_typed_atomic <- function(v, type) {
  na <- switch(type, logical = NA, integer = NA_integer_, double = NA_real_, character = NA_character_)
  if (is.list(v)) {
    if (!length(v)) return(vector(type, 0L))
    # Mixed arrays: only doubles mix numbers with "NaN"/"Inf"/"-Inf" (and null).
    if (type != "double") stop(sprintf("%s elements of mixed kinds", type))
    ok <- vapply(v, function(e) is.null(e) || (length(e) == 1L && (is.numeric(e) || is.character(e))), logical(1))
    if (!all(ok)) stop("double elements must be numbers, \"NaN\", \"Inf\", \"-Inf\" or null")
    v <- vapply(v, function(e) if (is.null(e)) NA_character_ else if (is.character(e)) e
                else sprintf("%.17g", e), character(1), USE.NAMES = FALSE)
  }
  if (is.null(v)) stop("a value is missing")
  if (is.logical(v) && all(is.na(v))) return(rep(na, length(v)))
  switch(type,
    logical = if (is.logical(v)) v else stop("logical elements must be true, false or null"),
    integer = {
      if (!is.double(v) || any(!is.na(v) & (v != trunc(v) | abs(v) > .Machine$integer.max)))
        stop("integer elements must be whole numbers in R's integer range, or null")
      as.integer(v)
    },
    double = {
      if (is.double(v)) return(v)
      if (!is.character(v)) stop("double elements must be numbers or null")
      special <- c("NaN" = NaN, "Inf" = Inf, "-Inf" = -Inf)
      out <- suppressWarnings(as.double(v))
      hit <- !is.na(v) & v %in% names(special)
      out[hit] <- special[v[hit]]
      if (any(is.na(out) & !is.na(v) & !hit)) stop("double elements must be numbers or null")
      unname(out)
    },
    character = if (is.character(v)) v else stop("character elements must be strings or null")
  )
}

rsandbox_to_typed_json <- function(x) {
  out <- tryCatch(.rsb_typed(x, 0L), error = function(e) NULL)
  if (is.character(out) && length(out) == 1L && !is.na(out)) return(enc2utf8(out))
  cls <- tryCatch(as.character(class(x)), error = function(e) character())
  paste0("{\"type\":\"unsupported\",\"class\":", .rsb_json_array(.rsb_json_strings(cls)), "}")
}

.rsb_typed <- function(x, depth) {
  if (depth > .rsb_typed_max_depth) stop("nested too deeply")
  if (is.null(x)) return("{\"type\":\"null\"}")
  field <- function(key, json) paste0(",\"", key, "\":", json)
  strings <- function(s) .rsb_json_array(.rsb_json_strings(s))
  nms <- if (!is.null(names(x)) && !is.data.frame(x)) field("names", strings(names(x))) else ""
  cls <- oldClass(x)
  if (is.data.frame(x)) {
    if (!identical(cls, "data.frame")) stop("unsupported")
    columns <- vapply(x, .rsb_typed, character(1), depth = depth + 1L, USE.NAMES = FALSE)
    n <- .row_names_info(x, 2L)
    rn <- if (.row_names_info(x, 1L) < 0L) "" else {
      r <- attr(x, "row.names")
      field("row_names", if (is.character(r)) strings(r) else .rsb_json_array(.rsb_json_integers(r)))
    }
    return(paste0("{\"type\":\"data.frame\"", field("names", strings(names(x))),
                  field("columns", .rsb_json_array(columns)), field("nrow", n), rn, "}"))
  }
  if (is.factor(x)) {
    if (!(identical(cls, "factor") || identical(cls, c("ordered", "factor")))) stop("unsupported")
    return(paste0("{\"type\":\"factor\"", field("levels", strings(levels(x))),
                  field("codes", .rsb_json_array(.rsb_json_integers(unclass(x)))),
                  if (is.ordered(x)) field("ordered", "true"), nms, "}"))
  }
  if (identical(cls, "Date")) {
    return(paste0("{\"type\":\"Date\"", field("value", strings(format(x, "%Y-%m-%d"))), nms, "}"))
  }
  if (identical(cls, c("POSIXct", "POSIXt"))) {
    tz <- attr(x, "tzone")
    return(paste0("{\"type\":\"POSIXct\"", field("value", .rsb_json_array(.rsb_json_doubles(unclass(x)))),
                  if (length(tz)) field("tz", .rsb_json_strings(tz[1L])), nms, "}"))
  }
  if (is.object(x) || isS4(x)) stop("unsupported")
  if (typeof(x) == "pairlist") x <- as.list(x)
  if (is.list(x)) {
    if (!is.null(dim(x))) stop("unsupported")
    items <- vapply(x, .rsb_typed, character(1), depth = depth + 1L, USE.NAMES = FALSE)
    return(paste0("{\"type\":\"list\"", field("value", .rsb_json_array(items)), nms, "}"))
  }
  type <- typeof(x)
  elements <- switch(type,
    logical = .rsb_json_logicals(x), integer = .rsb_json_integers(x),
    double = .rsb_json_doubles(x), character = .rsb_json_strings(x),
    stop("unsupported"))
  d <- dim(x)
  shape <- if (is.null(d)) nms else {
    dn <- dimnames(x)
    paste0(field("dim", .rsb_json_array(.rsb_json_integers(d))),
           if (!is.null(dn)) field("dimnames", .rsb_json_array(vapply(dn, function(names)
             if (is.null(names)) "null" else strings(names), character(1), USE.NAMES = FALSE))))
  }
  paste0("{\"type\":\"", type, "\"", field("value", .rsb_json_array(elements)), shape, "}")
}
