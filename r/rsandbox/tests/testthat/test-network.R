# `sandbox_limits(network =)`: the request's network allowlist, which narrows the
# profile's `[network]` and never widens it. The profile names two hosts with
# documentation addresses: nothing is reached, a refusal needs no test host.

network_profile <- function() {
  path <- tempfile(fileext = ".toml")
  writeLines(c('extends = "strict"', "[network]", 'allow = ["a.test", "b.test"]',
               'hosts = { "a.test" = "192.0.2.1", "b.test" = "192.0.2.2" }'), path)
  path
}

skip_without_network_sandbox <- function() {
  skip_without_engine()
  # A network sandbox gets a network namespace of its own, which needs root here.
  skip_if_not(identical(unname(Sys.info()[["effective_user"]]), "root"), "a network sandbox needs root here")
}

test_that("network is checked in R and travels as limits.network = {allow: [...]}", {
  expect_identical(unclass(sandbox_limits(network = "a.test")), list(network = list(allow = list("a.test"))))
  expect_identical(as.character(jsonlite::toJSON(unclass(sandbox_limits(network = "a.test")), auto_unbox = TRUE)),
                   '{"network":{"allow":["a.test"]}}')
  expect_identical(as.character(jsonlite::toJSON(unclass(sandbox_limits(network = character())), auto_unbox = TRUE)),
                   '{"network":{"allow":[]}}')
  expect_identical(format(sandbox_limits(network = c("a.test", "*.b.test"), cpu = 2)), "cpu=2 network=a.test,*.b.test")
  expect_identical(format(sandbox_limits(network = character())), "network=none")
  # A named list through `limits =` is checked the same way.
  expect_identical(check_limits(list(network = "a.test")), sandbox_limits(network = "a.test"))
  for (wrong in list(1, NA_character_, "", "a.test b.test", "a.test,b.test", list("a.test"), TRUE)) {
    e <- tryCatch(sandbox_limits(network = wrong), rsandbox_bad_input = function(e) e)
    expect_s3_class(e, "rsandbox_bad_input")
    expect_match(conditionMessage(e), "`network` must be a character vector of host names", fixed = TRUE)
  }
})

test_that("a host outside the server's allowlist is refused, naming it; character() turns the proxy off", {
  skip_without_network_sandbox()
  profile <- network_profile()
  on.exit(unlink(profile))
  proxy <- "Sys.getenv('https_proxy')"
  expect_match(rsandbox_eval(proxy, profile = profile, quiet = TRUE), "^http://127\\.0\\.0\\.1:[0-9]+$")
  off <- rsandbox_eval(proxy, profile = profile, quiet = TRUE, limits = sandbox_limits(network = character()))
  expect_identical(off, "")
  # Wider than the profile: refused before anything runs, naming the host.
  wider <- tryCatch(rsandbox_eval("1", profile = profile, limits = sandbox_limits(network = "c.test")),
                    rsandbox_error = function(e) e)
  expect_s3_class(wider, "rsandbox_input_error")
  expect_identical(wider$code, "bad_input")
  expect_match(conditionMessage(wider), "network.allow entry \"c.test\" is outside this server's network allowlist",
               fixed = TRUE)
  # Narrowed to a.test: the code's b.test is refused by the allowlist, and the R error says so.
  refused <- tryCatch(rsandbox_eval("readLines(url('https://b.test/'))", profile = profile, quiet = TRUE,
                                    limits = sandbox_limits(network = "a.test")),
                      rsandbox_error = function(e) e)
  expect_s3_class(refused, "rsandbox_error")
  expect_match(conditionMessage(refused), "b.test:443 is not in this request's network.allow", fixed = TRUE)
  denied <- rsandbox_last_result()$network
  expect_s3_class(denied, "data.frame")
  expect_identical(denied$host, "b.test")
  expect_identical(denied$port, 443)
  expect_false(denied$allowed)
  expect_match(denied$reason, "not in this request's network.allow", fixed = TRUE)
  # A session takes the same limit.
  s <- sandbox_session(limits = sandbox_limits(network = character()), profile = profile)
  on.exit(s$close(), add = TRUE)
  expect_identical(s$execute(proxy, quiet = TRUE), "")
})
