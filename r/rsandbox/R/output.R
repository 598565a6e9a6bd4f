# What the sandbox printed, shown on the caller's console, and handed to output
# handlers.

# Text from a sandbox made inert for a terminal: C0 control characters other than
# newline and tab become caret notation (ESC is "^[", CR "^M", BEL "^G"), DEL "^?",
# and C1 controls (U+0080-U+009F, which some terminals obey as CSI and OSC) "<U+009B>".
# Only what is printed is changed; values and condition fields keep the raw text.
inert <- function(text) {
  if (!is.character(text) || !length(text)) return(text)
  vapply(text, inert_one, character(1), USE.NAMES = FALSE)
}

inert_one <- function(t) {
  if (is.na(t)) return(t)
  codes <- utf8ToInt(enc2utf8(t))
  if (anyNA(codes)) {
    # Not valid UTF-8: judged byte by byte, every byte above 127 shown as \xNN.
    codes <- as.integer(charToRaw(t))
    out <- vapply(codes, function(b) if (b >= 128L) sprintf("\\x%02x", b) else inert_char(b), character(1))
    return(paste(out, collapse = ""))
  }
  control <- (codes < 32L & codes != 10L & codes != 9L) | codes == 127L | (codes >= 128L & codes <= 159L)
  if (!any(control)) return(t)
  paste(vapply(codes, inert_char, character(1)), collapse = "")
}

inert_char <- function(cp) {
  if (cp < 32L && cp != 10L && cp != 9L) paste0("^", intToUtf8(cp + 64L))
  else if (cp == 127L) "^?"
  else if (cp >= 128L && cp <= 159L) sprintf("<U+%04X>", cp)
  else intToUtf8(cp)
}

# A message condition for the sandbox's messages and standard error, so that
# suppressMessages() and message handlers see them as they see any message.
sandbox_message <- function(text) {
  structure(class = c("rsandbox_message", "message", "condition"), list(message = inert(text), call = NULL))
}

# Show one piece of streamed output on the console: stdout with cat(), messages and
# stderr as message conditions. Warnings are not shown here: they are signalled as
# warnings when the evaluation has returned (see `signal_warnings()`), as R defers its
# own.
console_output <- function(text, stream) {
  if (identical(stream, "stdout")) {
    cat(inert(text))
  } else if (stream %in% c("stderr", "message")) {
    message(sandbox_message(text))
  }
  invisible(NULL)
}

# The sandbox's warnings as warnings here (class `rsandbox_warning`), after the result.
signal_warnings <- function(result) {
  for (w in result$warnings) {
    msg <- if (is.list(w)) w$message else w
    if (is.null(msg)) next
    warning(structure(class = c("rsandbox_warning", "warning", "condition"),
                      list(message = inert(as.character(msg)), call = NULL)))
  }
  said_by_error <- is.list(result$error) && endsWith(as.character(result$error$message %||% ""),
                                                     sub("^network: ", "", no_network_note))
  if (isTRUE(result$refused_network) && !said_by_error) {
    warning(structure(class = c("rsandbox_warning", "warning", "condition"),
                      list(message = no_network_note, call = NULL)))
  }
  invisible(NULL)
}

# An output handler as the server's events are dispatched to it: `function(text,
# stream)`. A handler of two or more arguments (or with `...`) is called with the text
# as it arrives and its stream; a handler of one argument (securer's
# `function(line)`) is called once per whole line, per stream, and once more at the end
# for a last line without a newline (`$finish()`).
output_adapter <- function(handler) {
  if (is.null(handler)) return(NULL)
  params <- formals(if (is.primitive(handler)) args(handler) else handler)
  if (length(params) >= 2L || "..." %in% names(params)) {
    return(list(feed = function(text, stream) handler(text, stream), finish = function() invisible(NULL)))
  }
  pending <- list()
  feed <- function(text, stream) {
    text <- paste0(pending[[stream]] %||% "", text)
    parts <- strsplit(text, "\n", fixed = TRUE)[[1]]
    if (!endsWith(text, "\n") && length(parts)) {
      pending[[stream]] <<- parts[length(parts)]
      parts <- parts[-length(parts)]
    } else {
      pending[[stream]] <<- NULL
    }
    for (line in parts) handler(line)
  }
  finish <- function() {
    left <- pending
    pending <<- list()
    for (line in left) if (nzchar(line)) handler(line)
  }
  list(feed = feed, finish = finish)
}
