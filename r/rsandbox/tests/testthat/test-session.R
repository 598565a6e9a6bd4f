test_that("a session keeps state and calls host tools of every argument type", {
  skip_without_engine()
  seen <- NULL
  tools <- list(
    sandbox_tool("add", function(a, b) a + b, "adds", list(a = "numeric", b = "numeric")),
    sandbox_tool("shout", function(s) toupper(s), "upper case", list(s = "character")),
    sandbox_tool("count", function(n) n + 1L, "next integer", list(n = "integer")),
    sandbox_tool("negate", function(b) !b, "not", list(b = "logical")),
    sandbox_tool("keys", function(l) names(l), "names of a list", list(l = "list")),
    sandbox_tool("rows", function(d) { seen <<- d; nrow(d) }, "rows of a data frame", list(d = "data_frame"))
  )
  s <- sandbox_session(tools = tools)
  on.exit(s$close())
  s$execute("x <- 10")
  expect_equal(as.numeric(s$execute("add(x, 5)")), 15)
  expect_equal(as.character(s$execute("shout('hi')")), "HI")
  expect_equal(as.integer(s$execute("count(41L)")), 42L)
  expect_false(as.logical(s$execute("negate(TRUE)")))
  expect_equal(as.character(s$execute("keys(list(p = 1, q = 2))")), c("p", "q"))
  expect_equal(as.integer(s$execute("rows(data.frame(u = 1:3))")), 3L)
  expect_s3_class(seen, "data.frame")
})

test_that("a tool that errors gives an R error inside and the session survives", {
  skip_without_engine()
  s <- sandbox_session(tools = list(sandbox_tool("fails", function() stop("tool broke"))))
  on.exit(s$close())
  s$execute("k <- 1")
  e <- tryCatch(s$execute("fails()"), rsandbox_error = function(e) e)
  expect_s3_class(e, "rsandbox_eval_error")
  expect_match(conditionMessage(e), "tool broke")
  expect_true(e$state_kept)
  expect_equal(as.numeric(s$execute("k")), 1)
})

test_that("securer-style tool objects are accepted as they are", {
  skip_without_engine()
  securer_like <- structure(list(name = "twice", fn = function(x) 2 * x, description = "doubles",
                                 args = list(x = "numeric")), class = "securer_tool")
  s <- sandbox_session(tools = list(securer_like))
  on.exit(s$close())
  expect_equal(as.numeric(s$execute("twice(21)")), 42)
})

test_that("output streams to the handler while the code runs", {
  skip_without_engine()
  s <- sandbox_session()
  on.exit(s$close())
  got <- character()
  s$execute("cat('a\\n'); message('m')", output_handler = function(text, stream) got <<- c(got, paste0(stream, ":", text)))
  expect_true("stdout:a\n" %in% got)
  expect_true("message:m\n" %in% got)
})

test_that("files in and out, a listing, a snapshot restored elsewhere", {
  skip_without_engine()
  s <- sandbox_session()
  on.exit(s$close())
  f <- tempfile()
  writeLines("hello", f)
  s$put_file("in/h.txt", f)
  s$execute("writeLines(toupper(readLines('in/h.txt')), 'out.txt'); v <- 7")
  out <- tempfile()
  s$get_file("out.txt", out)
  expect_equal(readLines(out), "HELLO")
  expect_true(all(c("in/h.txt", "out.txt") %in% s$list_files()$path))
  e <- tryCatch(s$get_file("../../etc/passwd", tempfile()), rsandbox_error = function(e) e)
  expect_s3_class(e, "rsandbox_input_error")
  snap <- s$snapshot()
  expect_s3_class(snap, "rsandbox_snapshot")
  t <- sandbox_session(restore = snap)
  on.exit(t$close(), add = TRUE)
  expect_equal(as.numeric(t$execute("v * 6")), 42)
})

test_that("a timeout in R code keeps the session; restart and close work", {
  skip_without_engine()
  s <- sandbox_session()
  s$execute("keep <- 'yes'")
  e <- tryCatch(s$execute("Sys.sleep(30)", timeout = 0.5), rsandbox_error = function(e) e)
  expect_s3_class(e, "rsandbox_timeout")
  expect_true(e$state_kept)
  expect_equal(as.character(s$execute("keep")), "yes")
  s$restart()
  expect_false(as.logical(s$execute("exists('keep')")))
  expect_true(s$is_alive())
  s$close()
  expect_false(s$is_alive())
})

test_that("a dead server process is restarted for the next evaluation", {
  skip_without_engine()
  expect_equal(as.numeric(rsandbox_eval("1")), 1)
  server <- rsandbox:::default_server()
  server$process$kill()
  server$process$wait(2000)
  expect_equal(as.numeric(rsandbox_eval("2")), 2)
})

test_that("a pool evaluates concurrently and resets between uses", {
  skip_without_engine()
  marks <- character()
  p <- sandbox_pool(size = 2, tools = list(sandbox_tool("mark", function(what) { marks <<- c(marks, what); TRUE },
                                                        args = list(what = "character"))))
  on.exit(p$close())
  results <- p$execute_all(c("mark('start'); Sys.sleep(1); mark('end'); 1",
                             "mark('start'); Sys.sleep(1); mark('end'); 2", "stop('third')"))
  # Both started before either ended: they ran at the same time.
  expect_equal(marks, c("start", "start", "end", "end"))
  expect_equal(as.numeric(results[[1]]), 1)
  expect_equal(as.numeric(results[[2]]), 2)
  expect_s3_class(results[[3]], "rsandbox_eval_error")
  expect_equal(as.numeric(p$execute("exists('x'); 5")), 5)
  expect_equal(p$status()$size, 2)
  expect_equal(p$status()$busy, 0)
})

test_that("an interrupt stops the running code and keeps the session", {
  skip_without_engine()
  s <- sandbox_session()
  on.exit(s$close())
  s$execute("kept <- 99")
  # R is single-threaded: interrupt from a callback that runs during the execute.
  e <- tryCatch(
    s$execute("cat('started\\n'); repeat {}", output_handler = function(text, stream) {
      if (grepl("started", text)) s$interrupt()
    }),
    rsandbox_error = function(e) e
  )
  expect_s3_class(e, "rsandbox_interrupted")
  expect_true(e$state_kept)
  expect_equal(as.numeric(s$execute("kept")), 99)
})

test_that("tool wrappers are locked bindings: the code cannot replace them for later calls", {
  skip_without_engine()
  s <- sandbox_session(tools = list(sandbox_tool("add", function(a, b) a + b, "adds", list(a = "numeric", b = "numeric"))))
  on.exit(s$close())
  for (code in c("add <- function(a, b) 0", "assign('add', function(a, b) 0, envir = globalenv())")) {
    e <- tryCatch(s$execute(code), rsandbox_eval_error = function(e) e)
    expect_s3_class(e, "rsandbox_eval_error")
    expect_match(conditionMessage(e), "cannot change value of locked binding for 'add'", fixed = TRUE)
  }
  expect_equal(as.numeric(s$execute("add(2, 3)")), 5)
  e <- tryCatch(s$execute("add('two', 3)"), rsandbox_eval_error = function(e) e)
  expect_match(conditionMessage(e), "Tool 'add': argument 'a' must be numeric, got character", fixed = TRUE)
  # A snapshot leaves the tools out; the restored session has its own, locked again.
  s$execute("x <- 1")
  r <- sandbox_session(tools = list(sandbox_tool("add", function(a, b) a - b, "subtracts",
                                                 list(a = "numeric", b = "numeric"))), restore = s$snapshot())
  on.exit(r$close(), add = TRUE)
  expect_equal(as.numeric(r$execute("add(x, 3)")), -2)
  # Under a function allowlist the code runs in an environment of its own: locked there too.
  profile <- tempfile(fileext = ".toml")
  writeLines('functions = ["arithmetic"]', profile)
  a <- sandbox_session(tools = list(sandbox_tool("add", function(a, b) a + b, "adds", list(a = "numeric", b = "numeric"))),
                       profile = profile)
  on.exit(a$close(), add = TRUE)
  expect_error(a$execute("add <- function(a, b) 0"), "locked binding", class = "rsandbox_eval_error")
  expect_equal(as.numeric(a$execute("add(2, 2)")), 4)
})

test_that("a server whose object is collected does not end one started after the same set.seed()", {
  # R CMD check calls set.seed(1) before each example, and processx draws its process
  # markers from R's random numbers: two servers started in one second got one marker,
  # and collecting the first one's object killed the second ("killed by signal 9").
  skip_without_engine()
  set.seed(1)
  first <- Server$new(character())
  set.seed(1)
  second <- Server$new(character())
  on.exit(second$close())
  first$close()
  rm(first)
  invisible(gc())
  Sys.sleep(0.3)
  expect_true(second$is_alive())
  s <- Session$new(server = second)
  expect_equal(as.numeric(s$execute("1 + 1")), 2)
  s$close()
})

test_that("starting a server leaves the caller's random numbers as they were", {
  skip_without_engine()
  set.seed(7)
  expected <- runif(3)
  set.seed(7)
  server <- Server$new(character())
  on.exit(server$close())
  expect_identical(runif(3), expected)
})
