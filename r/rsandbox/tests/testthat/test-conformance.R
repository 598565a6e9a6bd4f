# The conformance table (tests/conformance/scenarios.json at the repository's root) on
# this package: every scenario whose `fronts$r` is "yes", mapped to rsandbox_eval() and
# sandbox_session(), with the same expectations the other fronts check (see
# tests/conformance/README.md). scripts/test-r.sh exports the table's path as
# RSANDBOX_CONFORMANCE; without it this test skips and says so.

conformance_table <- function() {
  path <- Sys.getenv("RSANDBOX_CONFORMANCE")
  if (!nzchar(path)) return(NULL)
  jsonlite::fromJSON(path, simplifyVector = FALSE)
}

conf_code <- function(step) {
  code <- step$code
  if (is.list(code)) return(strrep(code[["repeat"]], code$times))
  code
}

conf_limits <- function(limits) {
  if (is.null(limits) || !length(limits)) return(sandbox_limits())
  do.call(sandbox_limits, limits)
}

# A tool whose host side answers by the table's policy; its formals are the declared
# arguments (the client reads a tool's arguments from them when `args` is not given).
conf_tool <- function(spec) {
  arg_names <- names(spec$args)
  fn <- function() NULL
  if (length(arg_names)) formals(fn) <- stats::setNames(rep(alist(x = ), length(arg_names)), arg_names)
  body(fn) <- switch(spec$policy,
    sum = quote(sum(unlist(mget(names(formals(sys.function())))))),
    first = quote(get(names(formals(sys.function()))[1])),
    fail = quote(stop("the host refused this call")),
    stop("unknown policy ", spec$policy))
  sandbox_tool(spec$name, fn, spec$description %||% "", if (length(arg_names)) lapply(spec$args, identity) else NULL)
}

`%||%` <- function(a, b) if (is.null(a)) b else a

# A reply in the table's terms: list(kind = "result", value = <result list>), or
# list(kind = "error", code = ...), or another kind.
conf_reply <- function(expr) {
  env <- rsandbox:::.state
  env$last_result <- NULL
  tryCatch({
    value <- force(expr)
    if (inherits(value, "rsandbox_result")) list(kind = "result", value = value) else value
  }, rsandbox_error = function(e) {
    if (!is.null(e$code)) return(list(kind = "error", code = e$code, message = conditionMessage(e)))
    if (inherits(e, "rsandbox_bad_input") || inherits(e, "rsandbox_input_error")) {
      return(list(kind = "error", code = "bad_input", message = conditionMessage(e)))
    }
    if (inherits(e, "rsandbox_closed")) return(list(kind = "error", code = "unknown_session", message = conditionMessage(e)))
    if (!is.null(env$last_result)) return(list(kind = "result", value = env$last_result))
    list(kind = "error", code = NA_character_, message = conditionMessage(e))
  })
}

conf_equal <- function(got, want) {
  if (is.null(want)) return(is.null(got))
  if (is.list(want) && !length(want)) return(!length(got))
  if (is.numeric(want)) return(is.numeric(got) && length(got) == 1L && isTRUE(all.equal(as.numeric(got), want)))
  isTRUE(all.equal(got, want, check.attributes = FALSE))
}

# NULL when the reply meets the expectation, else why not.
conf_check <- function(expect, reply) {
  if (is.null(expect)) expect <- list()
  if (!is.null(expect$error_code)) {
    if (identical(reply$kind, "error") && identical(reply$code, expect$error_code)) return(NULL)
    return(sprintf("expected error %s, got %s", expect$error_code, conf_show(reply)))
  }
  if (identical(reply$kind, "error")) return(sprintf("expected success, got error %s: %s", reply$code, reply$message))
  keys <- c("outcome", "value", "value_within", "stdout_contains", "stdout_excludes", "error_contains",
            "syntax_error", "reset", "reset_reason", "plots", "refused_network")
  if (any(keys %in% names(expect))) {
    if (!identical(reply$kind, "result")) return(paste("expected a result, got", conf_show(reply)))
    r <- reply$value
    if (!is.null(expect$outcome) && !identical(r$outcome, expect$outcome)) {
      return(sprintf("outcome %s instead of %s: %s", format(r$outcome), expect$outcome, conf_show(reply)))
    }
    if ("value" %in% names(expect) && !conf_equal(r$value, expect$value)) {
      return(sprintf("value %s instead of %s", format(r$value), format(expect$value)))
    }
    if (!is.null(w <- expect$value_within)) {
      room <- max(w$abs %||% 0, (w$rel %||% 0) * w$target)
      if (!is.numeric(r$value) || abs(r$value - w$target) > room) {
        return(sprintf("value %s is not within %s of %s", format(r$value), room, w$target))
      }
    }
    stdout <- paste(r$stdout %||% "", collapse = "")
    if (!is.null(expect$stdout_contains) && !grepl(expect$stdout_contains, stdout, fixed = TRUE)) {
      return(sprintf("stdout lacks %s: %s", expect$stdout_contains, substr(stdout, 1, 400)))
    }
    if (!is.null(expect$stdout_excludes) && grepl(expect$stdout_excludes, stdout, fixed = TRUE)) {
      return(sprintf("stdout has %s", expect$stdout_excludes))
    }
    if (!is.null(expect$error_contains)) {
      message <- r$error$message %||% ""
      if (!grepl(expect$error_contains, message, fixed = TRUE)) {
        return(sprintf("the error does not say %s: %s", expect$error_contains, message))
      }
    }
    if (!is.null(expect$syntax_error) && !identical(!is.null(r$syntax_error), expect$syntax_error)) {
      return("syntax_error is not as expected")
    }
    if (!is.null(expect$reset) && !identical(isTRUE(r$reset), expect$reset)) {
      return(sprintf("reset should be %s", expect$reset))
    }
    if (!is.null(expect$reset_reason) && !identical(r$reset_reason, expect$reset_reason)) {
      return(sprintf("reset_reason %s instead of %s", format(r$reset_reason), expect$reset_reason))
    }
    if (!is.null(expect$plots) && length(r$plots) != expect$plots) {
      return(sprintf("%d plots instead of %d", length(r$plots), expect$plots))
    }
    if (!is.null(expect$refused_network) && !identical(isTRUE(r$refused_network), expect$refused_network)) {
      return(sprintf("refused_network should be %s", expect$refused_network))
    }
  }
  # $interrupt() sends without waiting for the server's answer: the R client cannot say
  # whether something was interrupted, so `interrupted` is not checked here.
  if (!is.null(expect$data) && !identical(reply$value, expect$data)) {
    return(sprintf("expected the data %s, got %s", expect$data, conf_show(reply)))
  }
  if (!is.null(expect$files_include)) {
    missing <- setdiff(unlist(expect$files_include), reply$value)
    if (length(missing)) return(paste("not listed:", paste(missing, collapse = ", ")))
  }
  NULL
}

conf_show <- function(reply) paste(utils::capture.output(utils::str(reply, max.level = 2)), collapse = " ")

conf_step <- function(step, state) {
  session <- function() state$sessions[[step$session %||% "main"]]
  timeout <- step$timeout %||% 30
  switch(step$op,
    eval = conf_reply(rsandbox_eval(conf_code(step), timeout = timeout, limits = conf_limits(step$limits),
                                    quiet = TRUE, result = TRUE)),
    session.create = ,
    session.restore = {
      restore <- if (step$op == "session.restore") state$snapshot else NULL
      reply <- conf_reply(sandbox_session(tools = lapply(step$tools, conf_tool), limits = conf_limits(step$limits),
                                          restore = restore))
      if (inherits(reply, "R6")) {
        state$sessions[[step$as %||% "main"]] <- reply
        reply <- list(kind = "created")
      }
      reply
    },
    session.execute = conf_reply(session()$execute(conf_code(step), timeout = timeout, quiet = TRUE, result = TRUE)),
    session.interrupt = conf_reply({ session()$interrupt(); list(kind = "interrupted") }),
    session.put_file = conf_reply({
      from <- tempfile()
      on.exit(unlink(from))
      writeBin(charToRaw(step$data), from)
      session()$put_file(step$path, from)
      list(kind = "done")
    }),
    session.get_file = conf_reply({
      to <- tempfile()
      on.exit(unlink(to))
      session()$get_file(step$path, to)
      list(kind = "data", value = rawToChar(readBin(to, "raw", file.info(to)$size)))
    }),
    session.list_files = conf_reply(list(kind = "files", value = session()$list_files()$path)),
    session.snapshot = conf_reply({ state$snapshot <- session()$snapshot(); list(kind = "snapshot") }),
    session.close = conf_reply({
      s <- session()
      if (isTRUE(s$.__enclos_env__$private$closed)) {
        # Closing again: the client's own refusal.
        rsandbox:::rsandbox_abort("rsandbox_closed", "this session is closed")
      }
      s$close()
      list(kind = "closed")
    }),
    stop("the table says R cannot express ", step$op))
}

conf_run <- function(scenario) {
  state <- new.env()
  state$sessions <- list()
  on.exit(for (s in state$sessions) try(s$close(), silent = TRUE))
  for (i in seq_along(scenario$steps)) {
    step <- scenario$steps[[i]]
    if (!is.null(step$background) || !is.null(step$concurrent_with)) stop("the R runner cannot run steps concurrently")
    why <- conf_check(step$expect, conf_step(step, state))
    if (!is.null(why)) return(sprintf("step %d (%s): %s", i - 1L, step$op, why))
  }
  NULL
}

test_that("the conformance table holds on the R package", {
  table <- conformance_table()
  skip_if(is.null(table), "RSANDBOX_CONFORMANCE is not set (scripts/test-r.sh sets it to tests/conformance/scenarios.json)")
  skip_without_engine()
  started <- Sys.time()
  ran <- 0L
  for (scenario in table$scenarios) {
    if (!identical(scenario$fronts$r, "yes")) next
    known <- scenario$known$r
    if (!is.null(known)) {
      # Not run: a known failure here can leave the client's server stuck (one does),
      # which would hold up every scenario after it.
      message(sprintf("conformance (R): known failure, not run: %s: %s", scenario$id, known))
      next
    }
    why <- conf_run(scenario)
    expect(is.null(why), sprintf("%s: %s", scenario$id, why))
    ran <- ran + 1L
  }
  expect_gt(ran, 20L)
  message(sprintf("conformance (R): %d scenarios in %.1f s", ran, as.numeric(Sys.time() - started, units = "secs")))
})
