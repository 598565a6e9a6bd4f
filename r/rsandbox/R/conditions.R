# Classed conditions. Every failure inherits `rsandbox_error` and says whether the
# session kept its state (`state_kept`: TRUE, FALSE, or NA when not known).

rsandbox_condition <- function(class, message, state_kept, ..., call = NULL) {
  structure(
    class = c(class, "rsandbox_error", "error", "condition"),
    list(message = message, call = call, state_kept = state_kept, ...)
  )
}

# The condition for a result whose outcome is not `ok` (NULL for `ok`).
condition_for <- function(result) {
  r <- result
  kept <- if (isTRUE(r$reset)) FALSE else TRUE
  reset <- if (isTRUE(r$reset)) paste0(" (the session was reset: ", r$reset_reason, ")") else ""
  switch(r$outcome,
    ok = NULL,
    error = rsandbox_condition("rsandbox_eval_error",
      paste0(if (!is.null(r$error$call)) paste0("Error in ", r$error$call, ": ") else "Error: ", r$error$message, reset),
      state_kept = kept, r_message = r$error$message, r_call = r$error$call, stdout = r$stdout, result = r),
    timeout = rsandbox_condition("rsandbox_timeout", paste0("the time limit was reached", reset),
      state_kept = kept, stdout = r$stdout, result = r),
    interrupted = rsandbox_condition("rsandbox_interrupted", paste0("interrupted", reset),
      state_kept = kept, stdout = r$stdout, result = r),
    violation = rsandbox_condition("rsandbox_violation",
      paste0("forbidden system call ", r$violation$syscall, "; the sandbox was ended", reset),
      state_kept = kept, syscall = r$violation$syscall, result = r),
    crashed = rsandbox_condition("rsandbox_crash",
      paste0("the sandboxed R process crashed: ", r$error$message, reset),
      state_kept = kept, result = r),
    {
      limit <- sub("_limit$", "", r$outcome)
      rsandbox_condition("rsandbox_limit", paste0("the ", gsub("_", " ", limit), " limit was reached", reset),
        state_kept = kept, limit = limit, result = r)
    }
  )
}

# A protocol error (`{"error": {code, message}}`) as a condition.
error_response <- function(response) {
  code <- response$error$code
  class <- if (identical(code, "sandbox_setup_failed")) "rsandbox_setup_error"
    else if (identical(code, "bad_input")) "rsandbox_input_error"
    else "rsandbox_server_error"
  rsandbox_condition(class, paste0(response$error$message, " [", code, "]"), state_kept = NA, code = code)
}
