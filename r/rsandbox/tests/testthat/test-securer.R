# securer's API on rsandbox (use_securer_api()): each entry point with securer's
# arguments, and each deliberate difference.

api <- securer_api()

test_that("use_securer_api attaches its own search path entry and can be attached again", {
  use_securer_api()
  on.exit(detach("rsandbox:securer", character.only = TRUE))
  expect_true("rsandbox:securer" %in% search())
  expect_identical(get("SecureSession", as.environment("rsandbox:securer")), api$SecureSession)
  use_securer_api()
  expect_equal(sum(search() == "rsandbox:securer"), 1L)
  expect_setequal(ls(as.environment("rsandbox:securer")),
                  c("SecureSession", "SecureSessionPool", "securer_tool", "securer_tool_class", "execute_r",
                    "with_secure_session", "validate_code", "default_limits", "as_ellmer_tool", "securer_as_ellmer_tool"))
})

test_that("SecureSession returns values as securer does: no auto-print, output lines in an attribute", {
  skip_without_engine()
  s <- api$SecureSession$new(sandbox = TRUE)
  on.exit(s$close())
  expect_equal(s$execute("1 + 1"), 2)
  expect_null(attr(s$execute("1 + 1"), "output"))
  value <- s$execute('cat("first\\n"); message("second"); x <- 42')
  expect_equal(as.numeric(value), 42)
  expect_equal(attr(value, "output"), c("first", "second"))
  expect_equal(s$execute("x * 2"), 84)
  df <- s$execute("data.frame(a = 1:2, b = c('p', 'q'))")
  expect_s3_class(df, "data.frame")
  expect_equal(df$b, c("p", "q"))
  expect_null(s$execute("invisible(NULL)"))
})

test_that("tools made with securer_tool are called on the host, with verbose messages", {
  skip_without_engine()
  add <- api$securer_tool("add", "Add two numbers", function(a, b) a + b, args = list(a = "numeric", b = "numeric"))
  expect_equal(add@name, "add")
  any_arg <- api$securer_tool("both", "Paste", function(a, b) paste(a, b), args = list(a = "character", b = NULL))
  s <- api$SecureSession$new(tools = list(add, any_arg), sandbox = TRUE, verbose = TRUE)
  on.exit(suppressMessages(s$close()))
  expect_message(value <- s$execute("add(2, 3)"), "\\[securer\\] Tool call: add")
  expect_equal(as.numeric(value), 5)
  expect_equal(suppressMessages(s$execute("both('a', 42)")), "a 42")
  expect_error(suppressMessages(s$execute("add('two', 3)")), "Tool 'add': argument 'a' must be numeric, got character",
               fixed = TRUE)
  expect_equal(names(s$tools()), c("add", "both"))
  expect_equal(s$tools()$add$args, list(a = "numeric", b = "numeric"))
  expect_error(api$securer_tool("bad name", "x", identity), "valid R identifier")
  expect_error(api$SecureSession$new(tools = list(add, add), sandbox = TRUE), "Duplicate tool names")
})

test_that("errors, timeouts and the tool-call cap are securer's errors; the session goes on", {
  skip_without_engine()
  counter <- api$securer_tool("tick", "Count", function() 1, args = list())
  s <- api$SecureSession$new(tools = list(counter), sandbox = TRUE)
  on.exit(s$close())
  s$execute("kept <- 'yes'")
  expect_error(s$execute("stop('boom')"), "^boom$", class = "securer_error")
  expect_error(s$execute("Sys.sleep(10)", timeout = 1), "Execution timed out after 1 second")
  # securer restarted the session after a timeout; an interrupt keeps the state.
  expect_equal(s$execute("kept"), "yes")
  expect_error(s$execute("for (i in 1:5) tick()", max_tool_calls = 2), "Maximum tool calls \\(2\\) exceeded")
  # securer could leave the session busy here; it is reset and usable.
  expect_equal(s$execute("tick() + 1"), 2)
  expect_error(s$execute("x <- "), "syntax error")
  expect_error(s$execute(strrep("1", 20), max_code_length = 10), "Code too long")
})

test_that("pre_execute_hook vetoes on the host; max_executions retires the session; errors can be sanitized", {
  skip_without_engine()
  seen <- character()
  hook <- function(code) {
    seen <<- c(seen, code)
    !grepl("forbidden", code)
  }
  s <- api$SecureSession$new(sandbox = TRUE, pre_execute_hook = hook, max_executions = 2, sanitize_errors = TRUE)
  on.exit(s$close())
  expect_error(s$execute("forbidden()"), "blocked by pre_execute_hook")
  expect_error(s$execute("stop('cannot open /home/alice/.ssh/id_rsa')"), "cannot open \\[path\\]")
  # A vetoed execute does not count (as in securer): this is the second.
  expect_equal(s$execute("1"), 1)
  expect_error(s$execute("2"), "Maximum executions \\(2\\) reached")
  expect_equal(seen, c("forbidden()", "stop('cannot open /home/alice/.ssh/id_rsa')", "1"))
})

test_that("output_handler gets whole lines as they come; max_output_lines caps the attribute", {
  skip_without_engine()
  s <- api$SecureSession$new(sandbox = TRUE)
  on.exit(s$close())
  lines <- character()
  value <- s$execute("for (i in 1:4) cat('line', i, '\\n'); 'done'", output_handler = function(l) lines <<- c(lines, l),
                     max_output_lines = 2)
  expect_equal(trimws(lines), paste("line", 1:4))
  expect_equal(length(attr(value, "output")), 2L)
  expect_error(s$execute("1", output_handler = "nope"), "must be a function")
})

test_that("limits: securer's names and units apply; what rsandbox cannot apply is refused, not ignored", {
  skip_without_engine()
  expect_equal(api$default_limits()$memory, 512 * 1024^2)
  s <- api$SecureSession$new(sandbox = TRUE, limits = list(memory = 256 * 1024^2, cpu = 5))
  on.exit(s$close())
  expect_error(s$execute("x <- numeric(1e9)"), "memory|allocate")
  expect_error(api$SecureSession$new(sandbox = TRUE, limits = list(stack = 8 * 1024^2)), "stack")
  expect_error(api$SecureSession$new(sandbox = TRUE, limits = list(memroy = 1e9)), "Unknown limit")
  expect_error(api$SecureSession$new(sandbox = TRUE, limits = list(cpu = -1)), "positive")
})

test_that("sandbox = FALSE still runs sandboxed, and says so once", {
  skip_without_engine()
  .state <- get(".state", asNamespace("rsandbox"))
  .state$warned_sandbox_false <- NULL
  expect_warning(s <- api$SecureSession$new(sandbox = FALSE), "no unsandboxed mode")
  on.exit(s$close())
  expect_error(s$execute("system('id')"), "forbidden system call execve")
  expect_silent(s2 <- api$SecureSession$new(sandbox = FALSE))
  s2$close()
})

test_that("restart, is_alive, close, format", {
  skip_without_engine()
  s <- api$SecureSession$new(sandbox = TRUE)
  s$execute("v <- 1")
  s$restart()
  expect_error(s$execute("v"), "not found")
  expect_true(s$is_alive())
  expect_match(format(s), "<SecureSession> \\[running\\]")
  s$close()
  expect_false(s$is_alive())
  expect_error(s$execute("1"), "Session is not running")
})

test_that("restart recovers a SecureSession whose server died", {
  skip_without_engine()
  s <- api$SecureSession$new(sandbox = TRUE)
  on.exit(s$close())
  s$execute("v <- 1")
  server <- s$.__enclos_env__$private$session$.__enclos_env__$private$server
  server$process$kill()
  server$process$wait(2000)
  expect_error(s$execute("v"))
  s$restart()
  expect_true(s$is_alive())
  expect_equal(s$execute("1 + 1"), 2)
})

test_that("SecureSessionPool: execute, acquire, status, reset between uses", {
  skip_without_engine()
  pool <- api$SecureSessionPool$new(size = 2, sandbox = TRUE, reset_between_uses = TRUE)
  on.exit(pool$close())
  expect_equal(pool$execute("y <- 6 * 7"), 42)
  expect_error(pool$execute("y"), "not found")
  expect_equal(pool$status(), list(total = 2L, busy = 0L, idle = 2L, dead = 0L))
  expect_equal(pool$size(), 2L)
  pool$close()
  expect_error(pool$execute("1"), "Pool is closed")
  expect_error(api$SecureSessionPool$new(size = 0), "at least 1")
})

test_that("execute_r, with_secure_session and validate_code", {
  skip_without_engine()
  expect_equal(api$execute_r("sum(1:10)"), 55)
  double <- api$securer_tool("double", "Twice", function(x) 2 * x, args = list(x = "numeric"))
  expect_equal(api$execute_r("double(21)", tools = list(double)), 42)
  expect_equal(api$with_secure_session(function(s) {
    s$execute("a <- 2")
    s$execute("a + 1")
  }), 3)
  ok <- api$validate_code("x <- system('ls'); y <- processx::run('ls')")
  expect_true(ok$valid)
  expect_length(ok$warnings, 2)
  expect_match(ok$warnings[1], "system")
  bad <- api$validate_code("x <- (")
  expect_false(bad$valid)
  expect_match(bad$error, "unexpected")
  expect_equal(api$validate_code("my_run <- function() 1; run <- 2")$warnings, character(0))
})

test_that("as_ellmer_tool says when ellmer is missing", {
  skip_if(requireNamespace("ellmer", quietly = TRUE), "ellmer is installed")
  expect_error(api$as_ellmer_tool(), "ellmer is required")
})
