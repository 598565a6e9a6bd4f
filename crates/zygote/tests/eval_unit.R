# Unit tests for crates/zygote/src/eval.R, without the Rust host.
#
#   Rscript crates/zygote/tests/eval_unit.R        (from the repository root)
#
# eval.R is sourced into a fresh environment whose parent is baseenv(), as
# the zygote does. Everything here lives inside local() because the code
# under test evaluates user code in globalenv() and the tests clear it.
# Exits with status 1 at the first failed check.

local({
  find_eval_r <- function() {
    candidates <- "crates/zygote/src/eval.R"
    script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
    if (length(script) == 1L) {
      candidates <- c(candidates, file.path(dirname(script), "..", "src", "eval.R"))
    }
    found <- candidates[file.exists(candidates)]
    if (length(found) == 0L) {
      cat("cannot find crates/zygote/src/eval.R; run from the repository root\n")
      quit(status = 1)
    }
    found[1L]
  }

  sb <- new.env(parent = baseenv())
  sys.source(find_eval_r(), envir = sb, keep.source = FALSE)

  passed <- 0L

  fail <- function(name, detail = NULL) {
    cat("FAILED:", name, "\n")
    if (!is.null(detail)) cat(detail, sep = "\n")
    cat(passed, "passed, 1 failed\n")
    quit(status = 1)
  }

  check <- function(name, ok, detail = NULL) {
    if (!isTRUE(ok)) fail(name, detail)
    passed <<- passed + 1L
  }

  check_equal <- function(name, got, expected) {
    check(name, identical(got, expected),
          c(paste("  expected:", encodeString(expected, quote = "'")),
            paste("  got:     ", encodeString(paste(got), quote = "'"))))
  }

  # Minimal JSON validator: tokens are rewritten to placeholders (S = string,
  # 0 = any other scalar) and containers are collapsed until, for valid
  # JSON, a single 0 remains.
  json_valid <- function(s) {
    if (!is.character(s) || length(s) != 1L || is.na(s) || !validUTF8(s)) return(FALSE)
    string_re <- "\"(?:[^\"\\\\\\x00-\\x1f]|\\\\(?:[\"\\\\/bfnrt]|u[0-9a-fA-F]{4}))*\""
    s <- gsub(string_re, "S", s, perl = TRUE)
    if (grepl("\"", s, fixed = TRUE)) return(FALSE)
    s <- gsub("[ \t\n\r]+", "", s)
    s <- gsub("-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?", "0", s, perl = TRUE)
    s <- gsub("true|false|null", "0", s)
    s <- gsub("S(?!:)", "0", s, perl = TRUE)
    repeat {
      before <- s
      s <- gsub("\\[(?:0(?:,0)*)?\\]", "0", s, perl = TRUE)
      s <- gsub("\\{(?:S:0(?:,S:0)*)?\\}", "0", s, perl = TRUE)
      if (identical(s, before)) break
    }
    identical(s, "0")
  }

  check_json <- function(name, x, expected) {
    got <- sb$rsandbox_to_json(x)
    check_equal(name, got, expected)
    check(paste(name, "(valid JSON)"), json_valid(got), got)
  }

  # Runs code through rsandbox_eval() with a fresh globalenv() and plot
  # directory, capturing what it writes to stdout and stderr.
  run <- function(code) {
    rm(list = ls(globalenv(), all.names = TRUE), envir = globalenv())
    plot_dir <- tempfile("plots-")
    dir.create(plot_dir)
    err_file <- tempfile("stderr-")
    err_con <- file(err_file, open = "wt")
    sink(err_con, type = "message")
    stdout <- tryCatch(
      utils::capture.output(json <- sb$rsandbox_eval(code, plot_dir)),
      finally = {
        sink(type = "message")
        close(err_con)
      }
    )
    stderr <- readLines(err_file)
    unlink(err_file)
    list(json = json, stdout = stdout, stderr = stderr, plot_dir = plot_dir)
  }

  result_json <- function(status = "ok", value = "null", visible = FALSE,
                          messages = "[]", warnings = "[]", error = "null",
                          syntax_error = "null",
                          plotted = if (status %in% c("syntax_error", "refused")) NA else FALSE) {
    # "plotted" is there once the code ran (the child takes it out of the result).
    paste0("{\"status\":\"", status, "\",\"value\":", value,
           ",\"visible\":", if (visible) "true" else "false",
           ",\"messages\":", messages, ",\"warnings\":", warnings,
           ",\"error\":", error, ",\"syntax_error\":", syntax_error,
           if (!is.na(plotted)) paste0(",\"plotted\":", if (plotted) "true" else "false"), "}")
  }

  check_run <- function(name, code, expected) {
    r <- run(code)
    check_equal(name, r$json, expected)
    check(paste(name, "(valid JSON)"), json_valid(r$json), r$json)
    invisible(r)
  }

  # --- validator self-check ------------------------------------------------
  check("json_valid accepts valid JSON",
        json_valid("{\"a\":[1,-2.5e+3,\"x\\\"y\",true,null,{}],\"b\":{\"c\":[]}}"))
  check("json_valid rejects invalid JSON",
        !json_valid("{\"a\":[1,]}") && !json_valid("[01]") && !json_valid("{\"a\"}") &&
          !json_valid("\"\001\"") && !json_valid("[1] [2]"))

  # --- zygote preparation ---------------------------------------------------
  sb$rsandbox_prepare_zygote(c("tools"))
  check("prepare: preload attaches package", "package:tools" %in% search())
  check("prepare: mc.cores", identical(getOption("mc.cores"), 1L))
  check("prepare: device option is a function", is.function(getOption("device")))
  check("prepare: no .Random.seed left",
        !exists(".Random.seed", envir = globalenv(), inherits = FALSE))
  # R's JIT compiles a function of the helpers' environment at its second call: one the
  # warm-up called only once was compiled again in every child that called it (~15-40 ms
  # of a fresh evaluation that returned a data frame or a matrix). After the preparation,
  # evaluating the common kinds of value compiles nothing more (each twice: a function
  # first called in a child is compiled at its second call there, a session's next request).
  compiled_helpers <- function() {
    names <- ls(sb, all.names = TRUE)
    names[vapply(names, function(n) {
      f <- get(n, envir = sb)
      is.function(f) && !is.primitive(f) && typeof(.Internal(bodyCode(f))) == "bytecode"
    }, NA)]
  }
  warmed <- compiled_helpers()
  for (code in c("data.frame(x = 1:3, y = c('a', 'b', 'c'))", "matrix(1:4, 2)", "factor('u')",
                 "c(a = 1, b = 2)", "list(a = 1, b = list(c = 'd'))", "as.Date('2026-01-01')")) {
    capture.output(sb$rsandbox_eval(code, tempdir()), sb$rsandbox_eval(code, tempdir()))
  }
  check_equal("prepare: the common values compile nothing in a child", setdiff(compiled_helpers(), warmed),
              character())
  err <- tryCatch(sb$rsandbox_prepare_zygote("rsbNoSuchPackage"), error = conditionMessage)
  check("prepare: error names the missing package", grepl("rsbNoSuchPackage", err), err)

  # --- encoder: scalars and vectors -----------------------------------------
  check_json("json: NULL", NULL, "null")
  check_json("json: double scalar", 1, "1")
  check_json("json: integer scalar", 42L, "42")
  check_json("json: logical scalar", TRUE, "true")
  check_json("json: string scalar", "a", "\"a\"")
  check_json("json: NA", NA, "null")
  check_json("json: NA_character_", NA_character_, "null")
  check_json("json: 0.1", 0.1, "0.1")
  check_json("json: 1/3 round-trips", 1 / 3, "0.3333333333333333")
  check_json("json: 1e5 without exponent", 1e5, "100000")
  check_json("json: large and small doubles", c(1e20, -2.5e-7, 2^53, 123456789012),
             "[1e+20,-2.5e-07,9007199254740992,123456789012]")
  check_json("json: large integer", .Machine$integer.max, "2147483647")
  check_json("json: NaN/Inf/NA", c(NaN, Inf, -Inf, NA, 1.5),
             "[\"NaN\",\"Inf\",\"-Inf\",null,1.5]")
  check_json("json: integer vector", 1:3, "[1,2,3]")
  check_json("json: logical vector with NA", c(TRUE, NA, FALSE), "[true,null,false]")
  check_json("json: empty vector", integer(0), "[]")
  check_json("json: named vector", c(a = 1, b = NA, c = 3.25), "{\"a\":1,\"b\":null,\"c\":3.25}")
  check_json("json: named length-1 vector", c(x = "y"), "{\"x\":\"y\"}")
  check_json("json: partly named vector", c(a = 1, 2), "[1,2]")
  check_json("json: complex", c(1+2i, NA), "[\"1+2i\",null]")
  check_json("json: factor", factor(c("lo", "hi", NA, "lo")), "[\"lo\",\"hi\",null,\"lo\"]")
  check_json("json: factor scalar", factor("z"), "\"z\"")
  check_json("json: Date", as.Date(c("2024-02-29", NA)), "[\"2024-02-29\",null]")
  check_json("json: POSIXct", as.POSIXct("2024-01-02 03:04:05", tz = "UTC"),
             "\"2024-01-02T03:04:05+00:00\"")

  # --- encoder: strings -----------------------------------------------------
  check_json("json: quotes and backslashes", "say \"hi\" \\ bye",
             "\"say \\\"hi\\\" \\\\ bye\"")
  check_json("json: whitespace escapes", "a\nb\tc\rd\be\ff",
             "\"a\\nb\\tc\\rd\\be\\ff\"")
  check_json("json: other control characters", "x\001y\037z\177",
             "\"x\\u0001y\\u001fz\177\"")
  unicode <- "h\u00e9llo \u4e16\u754c \U0001F600"
  check_json("json: unicode stays raw UTF-8", unicode, paste0("\"", unicode, "\""))
  check("json: output is UTF-8 encoded",
        identical(Encoding(sb$rsandbox_to_json(unicode)), "UTF-8"))
  latin1 <- iconv("caf\u00e9", "UTF-8", "latin1")
  check_json("json: latin1 input converted", latin1, "\"caf\u00e9\"")
  broken <- rawToChar(as.raw(c(0x61, 0xff, 0x62)))
  check("json: invalid UTF-8 still gives valid JSON", json_valid(sb$rsandbox_to_json(broken)))

  # --- encoder: data frames, matrices, lists ---------------------------------
  df <- data.frame(n = c(1.5, NA), s = c("a", NA), f = factor(c(NA, "u")), b = c(TRUE, NA),
                   stringsAsFactors = FALSE)
  check_json("json: data frame with NA", df,
             paste0("[{\"n\":1.5,\"s\":\"a\",\"f\":null,\"b\":true},",
                    "{\"n\":null,\"s\":null,\"f\":\"u\",\"b\":null}]"))
  check_json("json: data frame row names", data.frame(v = 1:2, row.names = c("r1", "r2")),
             "[{\"_row\":\"r1\",\"v\":1},{\"_row\":\"r2\",\"v\":2}]")
  check_json("json: empty data frame", df[0, ], "[]")
  check_json("json: date columns",
             data.frame(d = as.Date(c("2024-01-31", NA)),
                        t = as.POSIXct(c("2024-01-31 23:59:59", NA), tz = "UTC")),
             "[{\"d\":\"2024-01-31\",\"t\":\"2024-01-31T23:59:59+00:00\"},{\"d\":null,\"t\":null}]")
  ldf <- data.frame(id = 1:2)
  ldf$l <- list(1:2, list(k = "v"))
  check_json("json: list column", ldf, "[{\"id\":1,\"l\":[1,2]},{\"id\":2,\"l\":{\"k\":\"v\"}}]")
  check_json("json: matrix", matrix(1:6, nrow = 2), "[[1,3,5],[2,4,6]]")
  check_json("json: 1x1 matrix", matrix("a"), "[[\"a\"]]")
  check_json("json: character matrix with NA", matrix(c("a", NA, "b", "c"), 2, dimnames = list(NULL, c("x", "y"))),
             "[[\"a\",\"b\"],[null,\"c\"]]")
  check_json("json: 3-d array", array(1:8, c(2, 2, 2)), "[[[1,5],[3,7]],[[2,6],[4,8]]]")
  check_json("json: nested list", list(1, "a", list(b = TRUE, c = NULL, d = c(x = 1))),
             "[1,\"a\",{\"b\":true,\"c\":null,\"d\":{\"x\":1}}]")
  check_json("json: partly named list is an array", list(a = 1, 2), "[1,2]")
  check_json("json: named scalars (a tool call's arguments)",
             list(x = 1, y = "a\"b", z = TRUE, w = NA, n = 2L, "k\u00e9" = 0.1),
             "{\"x\":1,\"y\":\"a\\\"b\",\"z\":true,\"w\":null,\"n\":2,\"k\u00e9\":0.1}")
  check_json("json: named list with a vector in it", list(x = 1:2, y = "a"), "{\"x\":[1,2],\"y\":\"a\"}")
  check_json("json: named list with another attribute", structure(list(x = 1), extra = TRUE), "{\"x\":1}")
  check_json("json: named list with a name missing", structure(list(1, 2), names = c("a", NA)), "[1,2]")
  check_json("json: length-1 list is an array", list(5), "[5]")
  check_json("json: empty list", list(), "[]")
  deep <- 1
  for (i in 1:150) deep <- list(deep)
  deep_json <- sb$rsandbox_to_json(deep)
  check("json: deep nesting is cut off", json_valid(deep_json) && grepl("\"printed\":", deep_json))
  check("json: depth limit is 100",
        startsWith(deep_json, paste0(strrep("[", 101), "{\"class\":[\"list\"]")))

  # --- encoder: printed fallback --------------------------------------------
  fn <- sb$rsandbox_to_json(function(x) x + 1)
  check("json: function fallback", startsWith(fn, "{\"class\":[\"function\"],\"printed\":\"function"), fn)
  check("json: function fallback valid", json_valid(fn), fn)
  fit <- sb$rsandbox_to_json(stats::lm(dist ~ speed, data = datasets::cars))
  check("json: lm fallback class", startsWith(fit, "{\"class\":[\"lm\"],\"printed\":\""), fit)
  check("json: lm fallback printed non-empty", grepl("Coefficients", fit, fixed = TRUE), fit)
  check("json: lm fallback valid", json_valid(fit), fit)
  check_json("json: raw fallback", as.raw(1:3), "{\"class\":[\"raw\"],\"printed\":\"[1] 01 02 03\"}")
  check_json("json: formula fallback", stats::as.formula("y ~ x", env = globalenv()), "{\"class\":[\"formula\"],\"printed\":\"y ~ x\"}")
  env_json <- sb$rsandbox_to_json(new.env())
  check("json: environment fallback", startsWith(env_json, "{\"class\":[\"environment\"]") &&
          json_valid(env_json), env_json)
  long <- sb$rsandbox_to_json(structure(1:20000, class = "rsb_long"))
  check("json: printed output truncated", json_valid(long) && nchar(long) < 10200L, nchar(long))
  assign("print.rsb_broken", function(x, ...) stop("cannot print"), envir = globalenv())
  broken_print <- sb$rsandbox_to_json(structure(list(), class = "rsb_broken"))
  check("json: failing print method still gives valid JSON",
        json_valid(broken_print) && grepl("cannot print", broken_print), broken_print)
  rm("print.rsb_broken", envir = globalenv())

  big <- data.frame(x = stats::runif(1e4), y = sample(letters, 1e4, TRUE), z = seq_len(1e4),
                    w = stats::runif(1e4) > 0.5, stringsAsFactors = TRUE)
  elapsed <- system.time(big_json <- sb$rsandbox_to_json(big))[["elapsed"]]
  check("json: 10k-row data frame under a second", elapsed < 1, paste("took", elapsed, "s"))
  check("json: 10k-row data frame valid", json_valid(big_json))

  # --- evaluation: values and visibility -----------------------------------
  r <- check_run("eval: visible value", "1 + 1", result_json(value = "2", visible = TRUE))
  check_equal("eval: auto-print to stdout", r$stdout, "[1] 2")
  check_run("eval: assignment invisible", "x <- 1", result_json())
  check_run("eval: invisible()", "invisible(3)", result_json())
  check_run("eval: last of several", "1; 2", result_json(value = "2", visible = TRUE))
  check_run("eval: last visible value kept", "2\ninvisible(3)", result_json(value = "2"))
  check_run("eval: empty code", "", result_json())
  check_run("eval: comment only", "# nothing here\n", result_json())
  check_run("eval: visible NULL", "NULL", result_json(visible = TRUE))
  check_run("eval: data frame value", "data.frame(a = 1:2, b = c('x', NA))",
            result_json(value = "[{\"a\":1,\"b\":\"x\"},{\"a\":2,\"b\":null}]", visible = TRUE))
  r <- check_run("eval: user S3 print method used for auto-print",
                 "print.rsb_foo <- function(x, ...) cat('FOO\\n')\nstructure(1, class = 'rsb_foo')",
                 result_json(value = "{\"class\":[\"rsb_foo\"],\"printed\":\"FOO\"}", visible = TRUE))
  check_equal("eval: user S3 print method output", r$stdout, "FOO")
  r <- check_run("eval: auto-print of a plain value does not dispatch (as Rscript)",
                 "print.numeric <- function(x, ...) cat('mine\\n')\nprint.list <- function(x, ...) cat('mine\\n')\n2\nlist(1)",
                 result_json(value = "[1]", visible = TRUE))
  check_equal("eval: auto-print of a plain value (stdout)", r$stdout, c("[1] 2", "[[1]]", "[1] 1", ""))
  r <- check_run("eval: auto-print of a function dispatches (as Rscript)",
                 "print.function <- function(x, ...) cat('fun\\n')\nf <- function() 1\nf",
                 result_json(value = "{\"class\":[\"function\"],\"printed\":\"fun\"}", visible = TRUE))
  check_equal("eval: auto-print of a function (stdout)", r$stdout, "fun")
  check_run("eval: user-defined print() does not replace auto-print",
            "print <- function(...) stop('shadowed')\n7",
            result_json(value = "7", visible = TRUE))

  # --- evaluation: syntax errors --------------------------------------------
  check_run("eval: syntax error line/column", "x <- 1\ny z",
            result_json(status = "syntax_error", syntax_error = paste0(
              "{\"message\":\"2:3: unexpected symbol\\n1: x <- 1\\n2: y z\\n     ^\",",
              "\"line\":2,\"column\":3}")))
  check_run("eval: syntax error at end of input", "f(",
            result_json(status = "syntax_error", syntax_error = paste0(
              "{\"message\":\"2:0: unexpected end of input\\n1: f(\\n   ^\",",
              "\"line\":2,\"column\":0}")))
  check_run("eval: syntax error unexpected else", "if (TRUE) 1\nelse 2",
            result_json(status = "syntax_error", syntax_error = paste0(
              "{\"message\":\"2:1: unexpected 'else'\\n1: if (TRUE) 1\\n2: else\\n   ^\",",
              "\"line\":2,\"column\":1}")))
  check_run("eval: lexer error without position", "'\\q'",
            result_json(status = "syntax_error", syntax_error = paste0(
              "{\"message\":\"'\\\\q' is an unrecognized escape in character string starting \\\"'\\\\q\\\"\",",
              "\"line\":null,\"column\":null}")))
  r <- run("x <- 1\ny z\nprint('not run')")
  check("eval: nothing runs after a syntax error", length(r$stdout) == 0L, r$stdout)

  # --- evaluation: runtime errors -------------------------------------------
  check_run("eval: error message and call",
            "f <- function() stop(\"boom\"); f()",
            result_json(status = "error", error = paste0(
              "{\"message\":\"boom\",\"call\":\"f()\",",
              "\"trace\":[\"f()\",\"stop(\\\"boom\\\")\"]}")))
  check_run("eval: top-level stop has no call", "stop('top')",
            result_json(status = "error", error = "{\"message\":\"top\",\"call\":null,\"trace\":[\"stop(\\\"top\\\")\"]}"))
  r <- check_run("eval: stops at first error",
                 "a <- 1\n5\nstop('halt')\ncat('after\\n')\na <- 2",
                 result_json(status = "error", value = "5",
                             error = "{\"message\":\"halt\",\"call\":null,\"trace\":[\"stop(\\\"halt\\\")\"]}"))
  check_equal("eval: later expressions not run (stdout)", r$stdout, "[1] 5")
  check("eval: later expressions not run (state)", identical(get("a", envir = globalenv()), 1))
  check_run("eval: error while auto-printing",
            "print.rsb_bad <- function(x, ...) stop('no print')\nstructure(1, class = 'rsb_bad')",
            result_json(status = "error",
                        error = "{\"message\":\"no print\",\"call\":\"print.rsb_bad(x)\"}"))
  check_run("eval: nested tryCatch in user code",
            "tryCatch(stop('inner'), error = function(e) paste('caught', conditionMessage(e)))",
            result_json(value = "\"caught inner\"", visible = TRUE))
  check_run("eval: top-level break is an error", "break",
            result_json(status = "error",
                        error = "{\"message\":\"no loop for break/next, jumping to top level\",\"call\":null}"))
  check_run("eval: memory_limit",
            "x <- numeric(1e12)",
            result_json(status = "memory_limit",
                        error = paste0("{\"message\":\"cannot allocate vector of size 7450.6 Gb\",\"call\":null,",
                                       "\"trace\":[\"numeric(1e+12)\"]}")))
  check_run("eval: process_limit",
            "stop('unable to fork, possible reason: Resource temporarily unavailable')",
            result_json(status = "process_limit", error = paste0(
              "{\"message\":\"unable to fork, possible reason: Resource temporarily unavailable\",",
              "\"call\":null,\"trace\":[\"stop(\\\"unable to fork, possible reason: Resource temporarily ",
              "unavailable\\\")\"]}")))
  check_equal("classify: popen failure", sb$.rsb_error_status(
    "cannot popen 'ls', probable reason 'Cannot allocate memory'", character()), "process_limit")
  check_equal("classify: pipe() failure reported in a warning", sb$.rsb_error_status(
    "cannot open the connection", "cannot open pipe() cmd 'ls': Cannot allocate memory"),
    "process_limit")
  check_equal("classify: R_Calloc failure", sb$.rsb_error_status(
    "'R_Calloc' could not allocate memory (500000001 of 1 bytes)", character()), "memory_limit")
  check_equal("classify: ordinary error", sb$.rsb_error_status(
    "object 'x' not found", character()), "error")

  # --- evaluation: messages and warnings -------------------------------------
  r <- check_run("eval: messages and warnings captured",
                 "message('hello')\nwarning('top')\ng <- function() warning('inner')\ng()\nsqrt(-1)",
                 result_json(value = "\"NaN\"", visible = TRUE, messages = "[\"hello\\n\"]",
                             warnings = paste0("[{\"message\":\"top\",\"call\":null},",
                                               "{\"message\":\"inner\",\"call\":\"g()\"},",
                                               "{\"message\":\"NaNs produced\",\"call\":\"sqrt(-1)\"}]")))
  check_equal("eval: nothing on stderr", r$stderr, character())
  check_run("eval: suppressWarnings/suppressMessages respected",
            "suppressWarnings(warning('w')); suppressMessages(message('m'))", result_json())
  check_run("eval: warn = 2 turns warnings into errors",
            "options(warn = 2)\nas.integer('x')",
            result_json(status = "error", error = paste0(
              "{\"message\":\"(converted from warning) NAs introduced by coercion\",",
              "\"call\":null}")))
  options(warn = 0)
  r <- check_run("eval: under options(error), Rscript goes on after an error",
                 "options(error = expression(NULL))\nf <- function() stop('first')\nf()\nstop('second')\nx <- 2\nx",
                 result_json(value = "2", visible = TRUE))
  check_equal("eval: options(error): each error reported on stderr as R does", r$stderr,
              c("Error in f() : first", "Error: second"))
  options(error = NULL)
  check_run("eval: functions keep their source once code turns keep.source on",
            paste0("options(keep.source = TRUE)\nf <- function(x) {\n  x # kept\n}\n",
                   "!is.null(attr(f, 'srcref')) && any(grepl('# kept', deparse(f, control = 'useSource')))"),
            result_json(value = "true", visible = TRUE))
  options(keep.source = FALSE)
  check_run("eval: warnings before an error kept",
            "warning('first'); stop('second')",
            result_json(status = "error", warnings = "[{\"message\":\"first\",\"call\":null}]",
                        error = "{\"message\":\"second\",\"call\":null,\"trace\":[\"stop(\\\"second\\\")\"]}"))
  # One tryCatch() serves the whole request (.rsb_eval): what it logged, and where it
  # stopped, are the request's own.
  check_run("eval: messages and warnings of one request are not the next one's",
            { run("message('m'); warning('w'); 1"); "2" },
            result_json(value = "2", visible = TRUE))
  check_run("eval: under options(error), what each expression logged is kept",
            "options(error = expression(NULL))\nmessage('a')\nstop('b')\nwarning('c')\n3",
            result_json(value = "3", visible = TRUE, messages = "[\"a\\n\"]",
                        warnings = "[{\"message\":\"c\",\"call\":null}]"))
  options(error = NULL)
  check_run("eval: a later expression's error keeps the earlier expressions' value",
            "x <- 1\nx\nstop('late')",
            result_json(status = "error", value = "1",
                        error = "{\"message\":\"late\",\"call\":null,\"trace\":[\"stop(\\\"late\\\")\"]}"))
  check_run("eval: a condition that is both an error and an interrupt is an error",
            "stop(structure(class = c('interrupt', 'error', 'condition'), list(message = 'both', call = NULL)))",
            result_json(status = "error",
                        error = "{\"message\":\"both\",\"call\":null,\"trace\":[\"stop(structure(class = c(\\\"interrupt\\\", \\\"error\\\", \\\"condition\\\"), list(message = \\\"both\\\", call = NULL)))\"]}"))
  check_run("eval: an interrupt signalled by code ends it as interrupted",
            "x <- 1\nsignalCondition(structure(class = c('interrupt', 'condition'), list()))\nx <- 2",
            result_json(status = "interrupted"))
  check("eval: the interrupted request stopped where it was interrupted", identical(get("x", globalenv()), 1))

  # --- evaluation: RNG -------------------------------------------------------
  seeded <- run("set.seed(1); runif(2)")$json
  check_equal("eval: set.seed is deterministic", run("set.seed(1); runif(2)")$json, seeded)
  check_equal("eval: set.seed value", seeded,
              result_json(value = "[0.2655086631421,0.37212389963679016]", visible = TRUE))
  check("eval: unseeded runs differ", !identical(run("runif(1)")$json, run("runif(1)")$json))

  # --- evaluation: plots ------------------------------------------------------
  r <- check_run("eval: plot", "plot(1:10)", result_json(plotted = TRUE))
  png_path <- file.path(r$plot_dir, "plot-001.png")
  check("eval: plot file written", file.exists(png_path), list.files(r$plot_dir))
  magic <- readBin(png_path, "raw", n = 8L)
  check("eval: plot file is a PNG",
        identical(magic, as.raw(c(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a))))
  check("eval: devices closed after evaluation", is.null(grDevices::dev.list()))
  r <- run("plot(1:3); plot(3:1)")
  check_equal("eval: one file per page", sort(list.files(r$plot_dir)),
              c("plot-001.png", "plot-002.png"))
  r <- run("plot(1); stop('after plot')")
  check("eval: plot flushed after an error", file.exists(file.path(r$plot_dir, "plot-001.png")))

  cat(passed, "passed, 0 failed\n")
})
