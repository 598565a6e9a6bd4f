#' rsandbox: run untrusted R code in a kernel-enforced sandbox
#'
#' Evaluate R code you do not trust (code an LLM wrote, a student submitted, a package
#' nobody audited) inside isolation the Linux kernel enforces: namespaces, Landlock,
#' seccomp and resource limits, around a pre-forked R. The package is a client of the
#' \code{rsandbox} command (\code{rsandbox serve --stdio}); nothing that comes back from a
#' sandbox is evaluated or unserialized here: results travel as size-capped JSON.
#'
#' @section Start here:
#' \itemize{
#' \item \code{\link{rsandbox_eval}()}: one evaluation in a fresh sandbox; values in
#'   (\code{globals}, a function and its \code{args}) and out as plain R values.
#' \item \code{\link{sandbox_session}()}: a persistent session, whose code can call R
#'   functions of yours (\code{\link{sandbox_tool}()}); \code{\link{sandbox_pool}()}
#'   for several at once.
#' \item \code{\link{sandbox_limits}()}: memory, CPU, disk, processes, output.
#' \item \code{\link{rsandbox_last_result}()}, \code{\link{save_plot}()}: everything an
#'   evaluation produced.
#' \item \code{\link{rsandbox_learn}()}: a policy profile for code you trust.
#' \item \code{\link{use_securer_api}()}: securer's API on rsandbox;
#'   \code{vignette("coming-from-securer", package = "rsandbox")}.
#' \item \code{\link{rsandbox_available}()}, \code{\link{rsandbox_binary}()}: where the
#'   \code{rsandbox} command is.
#' }
#'
#' @section Errors:
#' Every error is a condition inheriting \code{rsandbox_error}, with
#' \code{state_kept}: \code{rsandbox_eval_error} (with the sandbox's call stack in
#' \code{sandbox_trace}), \code{rsandbox_timeout}, \code{rsandbox_limit},
#' \code{rsandbox_violation}, \code{rsandbox_crash}, \code{rsandbox_interrupted},
#' \code{rsandbox_setup_error}, \code{rsandbox_input_error} and
#' \code{rsandbox_bad_input} (a wrong argument, found before anything ran),
#' \code{rsandbox_closed}, \code{rsandbox_busy}.
#'
#' @examples
#' if (rsandbox_available()) {
#'   rsandbox_eval("sum(1:10)")
#' }
#' @keywords internal
"_PACKAGE"
