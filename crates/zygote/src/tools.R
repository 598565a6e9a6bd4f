# Tool stubs. Each host tool appears in the child as an R function of that name,
# in a locked environment attached to the search path ("rsandbox:tools"), and as a
# locked binding where user code runs (globalenv(), or the allowlist's
# environment), as securer locks its wrappers: `add <- function(...) 0` is an
# error instead of silently replacing the tool for every later call in the
# session. A stub collects the arguments it was given, encodes them as JSON and
# makes one blocking call over the child's own channel (native routine
# registered by the zygote). The host checks the name, argument names, types and
# sizes: whatever is checked here is a convenience, the host side is the
# boundary (code that unlocks a binding only changes how it calls the host).

rsandbox_define_tools <- function(tools) {
  env <- attach(NULL, name = "rsandbox:tools", warn.conflicts = FALSE)
  for (name in names(tools)) {
    assign(name, .rsb_tool_stub(name, tools[[name]]), envir = env)
  }
  lockEnvironment(env, bindings = TRUE)
  .rsb_lock_tools(.rsb_env())
  invisible(names(tools))
}

# The tool names (none before rsandbox_define_tools()).
.rsb_tool_names <- function() {
  if ("rsandbox:tools" %in% search()) ls(as.environment("rsandbox:tools"), all.names = TRUE) else character()
}

# Bind every stub in `env` (where user code runs) and lock the bindings.
.rsb_lock_tools <- function(env) {
  for (name in .rsb_tool_names()) {
    assign(name, get(name, envir = as.environment("rsandbox:tools")), envir = env)
    lockBinding(name, env)
  }
}

.rsb_tool_stub <- function(name, arg_names) {
  stub <- function() NULL
  formals(stub) <- stats::setNames(rep(list(quote(expr = )), length(arg_names)), arg_names)
  body(stub) <- bquote(.rsb_call_tool(.(name), .rsb_given_args(environment(), .(arg_names)), sys.call()))
  environment(stub) <- environment(.rsb_tool_stub)
  stub
}

# The arguments the caller supplied, read from the stub's own frame (a loop
# variable inside the stub could shadow an argument of the same name).
.rsb_given_args <- function(frame, arg_names) {
  args <- list()
  for (arg in arg_names) {
    if (!eval(call("missing", as.name(arg)), frame)) args[arg] <- list(get(arg, envir = frame))
  }
  args
}

.rsb_call_tool <- function(name, args, call) {
  json <- if (length(args) == 0L) "{}" else rsandbox_to_json(args)
  reply <- .Call(.rsb_state$routines$tool_call, name, json)
  if (!is.null(reply$error)) stop(simpleError(reply$error, call))
  reply$value
}
