# The audit log as securer's readers expect it (its fields, session_close, the
# truncation marker), and paths the server could not use refused up front.

read_audit <- function(path) {
  lapply(readLines(path), jsonlite::fromJSON, simplifyVector = FALSE)
}

test_that("every audit record has timestamp and session_id, and closing logs session_close", {
  skip_without_engine()
  dir <- tempfile("audit-")
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  path <- file.path(dir, "nested", "audit.jsonl") # a missing directory is created
  s <- sandbox_session(audit_log = path)
  s$execute("1 + 1")
  long <- paste(rep("1", 15000), collapse = "\n")
  s$execute(long, echo = FALSE)
  id <- s$id
  s$close()
  entries <- read_audit(path)
  events <- vapply(entries, function(e) e$event, character(1))
  expect_equal(events[1], "session_start")
  expect_equal(events[length(events)], "session_close")
  for (e in entries) {
    expect_match(e$timestamp, "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$")
    expect_identical(e$session_id, id)
  }
  starts <- entries[events == "execute_start"]
  expect_identical(starts[[1]]$code, "1 + 1")
  expect_identical(starts[[2]]$code, paste0(substr(long, 1, 10000), "... [truncated]"))
  expect_true(starts[[2]]$code_truncated)
  expect_equal(as.integer(file.info(path)$mode), strtoi("600", 8L))
})

test_that("device, symlink and shared audit paths are an rsandbox_bad_input error, not a dead server", {
  for (device in c("/dev/null", "/dev/full", "/dev/stderr")) {
    e <- tryCatch(sandbox_session(audit_log = device), error = function(e) e)
    expect_s3_class(e, "rsandbox_bad_input")
    expect_match(conditionMessage(e), "device file")
  }
  dir <- tempfile("audit-")
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  real <- file.path(dir, "real.jsonl")
  file.create(real)
  Sys.chmod(real, "0600")
  link <- file.path(dir, "link.jsonl")
  file.symlink(real, link)
  e <- tryCatch(sandbox_session(audit_log = link), error = function(e) e)
  expect_s3_class(e, "rsandbox_bad_input")
  expect_match(conditionMessage(e), "symlink")
  Sys.chmod(real, "0644")
  e <- tryCatch(sandbox_session(audit_log = real), error = function(e) e)
  expect_s3_class(e, "rsandbox_bad_input")
  expect_match(conditionMessage(e), "0644")
  e <- tryCatch(sandbox_session(audit_log = dir), error = function(e) e)
  expect_s3_class(e, "rsandbox_bad_input")
  expect_match(conditionMessage(e), "directory")
})

test_that("the server refuses a FIFO audit log at start with a message that names it", {
  skip_without_engine()
  dir <- tempfile("audit-")
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  fifo <- file.path(dir, "fifo")
  skip_if_not(system2("mkfifo", fifo) == 0L, "mkfifo is not available")
  Sys.chmod(fifo, "0600")
  # R cannot tell a FIFO from a file; the server checks before opening (no hang).
  e <- tryCatch(sandbox_session(audit_log = fifo), error = function(e) e)
  expect_s3_class(e, "rsandbox_error")
  expect_match(conditionMessage(e), "it is a FIFO")
})
