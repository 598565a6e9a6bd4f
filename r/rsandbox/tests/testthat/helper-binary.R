# The tests run the real engine: they need the rsandbox command (RSANDBOX_BIN, or a
# checkout in RSANDBOX_REPO after `cargo build`). Without it they skip and say why.
have_engine <- function() {
  tryCatch({ rsandbox_binary(); TRUE }, error = function(e) FALSE)
}
skip_without_engine <- function() {
  skip_if_not(have_engine(), "the rsandbox command is not available (set RSANDBOX_BIN)")
}
