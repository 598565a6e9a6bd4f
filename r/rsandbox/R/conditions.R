# Classed conditions. Every error this package raises inherits `rsandbox_error` (and
# rlang's `rlang_error`), and says whether the session kept its state (`state_kept`:
# TRUE, FALSE, or NA when not known or not applicable).
#
# Text that came from a sandbox (an R error message, the server's diagnostics) is made
# inert (see `inert()`) in the condition's message, which R prints; the raw text stays
# in the condition's fields (`r_message`, `result`) as data. Such text is never given
# to cli as a format string: it goes to rlang::abort() as a plain string.

# A condition object, not signalled (for results that carry conditions, as
# `$execute_all()` does).
rsandbox_condition <- function(class, message, state_kept, ..., call = NULL, parent = NULL) {
  rlang::error_cnd(class = unique(c(class, "rsandbox_error")), message = inert(message), state_kept = state_kept,
                   ..., call = call, parent = parent)
}

# Raise one.
rsandbox_abort <- function(class, message, state_kept = NA, ..., call = NULL, parent = NULL) {
  rlang::abort(inert(message), class = unique(c(class, "rsandbox_error")), state_kept = state_kept, ...,
               call = call, parent = parent)
}

# An argument that is wrong, found before anything was sent: `rsandbox_bad_input`
# (which is also an `rsandbox_input_error`). `message` is a cli template (our own text;
# values go in through cli's substitution, never pasted into the template).
bad_input <- function(message, call = rlang::caller_env(), .envir = parent.frame()) {
  cli::cli_abort(message, class = c("rsandbox_bad_input", "rsandbox_input_error", "rsandbox_error"),
                 state_kept = NA, call = call, .envir = .envir)
}

# The condition for a result whose outcome is not `ok` (NULL for `ok`).
condition_for <- function(result, call = NULL) {
  r <- result
  kept <- if (isTRUE(r$reset)) FALSE else TRUE
  reset <- if (isTRUE(r$reset)) paste0(" (the session was reset: ", r$reset_reason, ")") else ""
  switch(r$outcome,
    ok = NULL,
    error = rsandbox_condition("rsandbox_eval_error",
      paste0(if (!is.null(r$error$call)) paste0("Error in ", r$error$call, ": ") else "Error: ", r$error$message, reset),
      state_kept = kept, r_message = r$error$message, r_call = r$error$call,
      sandbox_trace = as.character(unlist(r$error$trace)), stdout = r$stdout, result = r, call = call),
    timeout = rsandbox_condition("rsandbox_timeout", paste0("the time limit was reached", reset),
      state_kept = kept, stdout = r$stdout, result = r, call = call),
    interrupted = rsandbox_condition("rsandbox_interrupted", paste0("interrupted", reset),
      state_kept = kept, stdout = r$stdout, result = r, call = call),
    violation = rsandbox_condition("rsandbox_violation",
      paste0("forbidden system call ", r$violation$syscall, "; the sandbox was ended", reset),
      state_kept = kept, syscall = r$violation$syscall, result = r, call = call),
    crashed = rsandbox_condition("rsandbox_crash",
      paste0("the sandboxed R process crashed: ", r$error$message, reset),
      state_kept = kept, result = r, call = call),
    {
      limit <- sub("_limit$", "", r$outcome)
      rsandbox_condition("rsandbox_limit", paste0("the ", gsub("_", " ", limit), " limit was reached", reset),
        state_kept = kept, limit = limit, result = r, call = call)
    }
  )
}

# A protocol error (`{"error": {code, message}}`) as a condition.
error_response <- function(response, call = NULL) {
  code <- response$error$code
  class <- if (identical(code, "sandbox_setup_failed")) "rsandbox_setup_error"
    else if (identical(code, "bad_input")) "rsandbox_input_error"
    else if (identical(code, "busy")) c("rsandbox_busy", "rsandbox_server_error")
    else "rsandbox_server_error"
  rsandbox_condition(class, paste0(response$error$message, " [", code, "]"), state_kept = NA, code = code, call = call)
}

# The sandbox's call stack of an R error (`sandbox_trace`: deparsed calls, outermost
# first, as the engine sent them; text, never parsed or run here), shown under the
# message as callr shows a subprocess's backtrace, so that printing the error,
# `rlang::last_error()` and `rlang::last_trace()` say where in the sandbox it happened.
# A single call is already the message's "Error in <call>".
cnd_footer.rsandbox_eval_error <- function(cnd, ...) {
  trace <- cnd$sandbox_trace
  if (length(trace) < 2L) return(character())
  c("In the sandbox (outermost call first):", paste0(" ", format(seq_along(trace)), ". ", inert(trace)))
}
