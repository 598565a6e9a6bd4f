# Issue #25: R objects into a sandbox and back, as data (never code, never serialize()):
# a function called with args as callr's r(), globals as mirai's, and the classes a
# grading script needs (factor, Date, POSIXct, data frame, matrix) surviving both ways.

test_that("a function is called in the sandbox with its args", {
  skip_without_engine()
  expect_identical(rsandbox_eval(function(x, y) x + y, args = list(1, 2), quiet = TRUE), 3)
  expect_identical(rsandbox_eval(function(x, y) x + y, args = list(1L, y = 2L), quiet = TRUE), 3L)
  expect_identical(rsandbox_eval(function(n) sum(seq_len(n)), args = list(10L), quiet = TRUE), 55L)
  e <- expect_error(rsandbox_eval(function(x) stop("no ", x), args = list("way"), quiet = TRUE), class = "rsandbox_eval_error")
  expect_equal(e$r_message, "no way")
})

test_that("globals are defined before the code runs, and values come back with their classes", {
  skip_without_engine()
  expect_identical(rsandbox_eval("x + y", globals = list(x = 1, y = 2), quiet = TRUE), 3)
  students <- data.frame(
    group = factor(c("treated", "control", NA), levels = c("control", "treated")),
    day = as.Date(c("2024-01-02", NA, "2024-02-29")),
    score = c(90L, NA, 75L),
    name = c("ann", "bob", NA),
    ratio = c(0.1 + 0.2, NaN, -Inf),
    passed = c(TRUE, NA, FALSE),
    row.names = c("a", "b", "c")
  )
  students$when <- as.POSIXct(c("2024-01-02 10:00:00", NA, "2024-02-29 23:59:59.5"), tz = "UTC")
  m <- matrix(1:6, 2, dimnames = list(c("r1", "r2"), c("x", "y", "z")))
  back <- rsandbox_eval("stopifnot(is.factor(d$group), inherits(d$day, 'Date'), is.integer(d$score),
                                   is.integer(m), identical(dim(m), 2:3))
                         list(d = d, m = m, sub = d[d$score > 80 & !is.na(d$score), ])",
                        globals = list(d = students, m = m), quiet = TRUE)
  expect_identical(back$d, students)
  expect_identical(back$m, m)
  expect_identical(back$sub, students[1, ])
  # An ordered factor, a named vector with NA, a nested list, NULL.
  x <- list(o = factor(c("lo", "hi"), levels = c("lo", "hi"), ordered = TRUE), v = c(a = 1.5, b = NA),
            nested = list(list(1L), NULL, character()))
  expect_identical(rsandbox_eval("x", globals = list(x = x), quiet = TRUE), x)
})

test_that("a session keeps its globals; typed results are opt-in for plain code", {
  skip_without_engine()
  s <- sandbox_session()
  on.exit(s$close())
  df <- data.frame(f = factor(c("a", "b")), d = as.Date(c("2024-01-01", "2024-12-31")))
  expect_identical(s$execute("df", globals = list(df = df), quiet = TRUE), df)
  # Still there; without typed the value is plain JSON (numbers as doubles), as before.
  expect_identical(s$execute("nrow(df)", quiet = TRUE), 2)
  expect_identical(s$execute("nrow(df)", typed = TRUE, quiet = TRUE), 2L)
  expect_identical(s$execute(function(d) levels(d$f), args = list(df), quiet = TRUE), c("a", "b"))
  # A value that cannot travel typed comes back as without typed.
  fit <- s$execute("lm(dist ~ speed, cars)", typed = TRUE, quiet = TRUE)
  expect_type(fit, "list")
})

test_that("what cannot travel as data is refused before anything runs", {
  skip_without_engine()
  before <- rsandbox_last_result()
  expect_error(rsandbox_eval("x", globals = list(x = new.env())), "environment", class = "rsandbox_bad_input")
  expect_error(rsandbox_eval("x", globals = list(x = function() 1)), "function", class = "rsandbox_bad_input")
  expect_error(rsandbox_eval("x", globals = list(x = new("externalptr"))), "external pointer", class = "rsandbox_bad_input")
  expect_error(rsandbox_eval("x", globals = list(x = list(ok = 1, bad = quote(f(y))))), "globals\\$x", class = "rsandbox_bad_input")
  expect_error(rsandbox_eval(function(x) x, args = list(lm(dist ~ speed, cars))), "lm", class = "rsandbox_bad_input")
  expect_error(rsandbox_eval("x", globals = list(1)), "named list", class = "rsandbox_bad_input")
  expect_error(rsandbox_eval("x", args = list(1)), "function", class = "rsandbox_bad_input")
  expect_identical(rsandbox_last_result(), before)
  s <- sandbox_session()
  on.exit(s$close())
  expect_error(s$execute("x", globals = list(x = globalenv())), class = "rsandbox_bad_input")
})
