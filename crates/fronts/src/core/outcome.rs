//! An outcome in words, once for every front that says it in a sentence (MCP's tool
//! results, the CLI's last stderr line). The outcome's name (`ok`, `timeout`, …) is the
//! engine's ([`rsandbox::Outcome::name`]); this is what happened, for a reader.

use rsandbox::{EvalResult, Outcome};
use std::time::Duration;

/// Why the code stopped, for every outcome but `ok` and `error` (an R error is said
/// by its own message): `timeout` the limit the run had, `max_output` its output cap.
pub fn stopped(result: &EvalResult, timeout: Duration, max_output: u64) -> Option<String> {
    Some(match result.outcome {
        Outcome::Ok | Outcome::Error => return None,
        Outcome::Timeout => Outcome::past_time_limit("the code", timeout),
        Outcome::Interrupted => "the code was interrupted".to_string(),
        Outcome::Violation => {
            let call = result.violation.as_ref().map_or("unknown", |v| v.syscall.as_str());
            // Under a profile with programs, execve is no violation: another call was.
            let why = if call.starts_with("execve") {
                "this sandbox cannot run programs"
            } else {
                "the sandbox never allows it"
            };
            format!("the code made a forbidden system call ({call}): {why}")
        }
        Outcome::MemoryLimit | Outcome::CpuLimit | Outcome::FileSizeLimit | Outcome::ProcessLimit => {
            result.outcome.limit_reached().unwrap_or_default().to_string()
        }
        Outcome::OutputLimit => format!("the code printed more than the output limit of {max_output} bytes"),
        Outcome::Crashed => {
            format!("the R process crashed ({})", result.error.as_ref().map_or("no detail", |e| e.message.as_str()))
        }
    })
}

/// Why the code's network attempts failed, when it made some in a sandbox without the
/// network and no R error already says so (an error's message ends with it): the code
/// went on, as `install.packages()` does after warnings, or a `try()` caught the error.
pub fn network_note(result: &EvalResult) -> Option<String> {
    let said_by_the_error = result.error.as_ref().is_some_and(|e| e.message.ends_with(EvalResult::NO_NETWORK));
    (result.refused_network && !said_by_the_error).then(|| format!("network: {}", EvalResult::NO_NETWORK))
}

/// Whether a session kept its variables after this result, in words.
pub fn kept(result: &EvalResult) -> &'static str {
    if result.reset {
        "The session was reset: its variables are gone; the next call starts from a fresh R."
    } else {
        "The session kept its variables."
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A network attempt without the network is said once: after the R error that it
    /// caused, or as a note of its own when the code went on; and the R package says it
    /// in the same words (it has only the result's flag).
    #[test]
    fn a_refused_network_attempt_is_said_once_in_the_engines_words() {
        let mut result = rsandbox::child::compose_observed(None, rsandbox::child::SupervisorView::default());
        assert_eq!(network_note(&result), None);
        result.refused_network = true;
        assert_eq!(network_note(&result), Some(format!("network: {}", EvalResult::NO_NETWORK)));
        result.error = Some(rsandbox::result::RError {
            message: format!("cannot open URL\nnetwork: {}", EvalResult::NO_NETWORK),
            ..rsandbox::result::RError::default()
        });
        assert_eq!(network_note(&result), None);
        let r_package = include_str!("../../../../r/rsandbox/R/results.R");
        let line = format!("no_network_note <- \"network: {}\"", EvalResult::NO_NETWORK);
        assert!(r_package.contains(&line), "the R package's words differ from the engine's: {line}");
    }
}
