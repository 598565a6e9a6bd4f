//! What happened to a request, in words a person understands: the supervisor's own
//! observations (its kill and why, a violation report, the exit status) and the child's
//! report become one [`EvalResult`] with one `outcome`.

use crate::result::*;
use wire::messages::ChildReport;

/// Why the supervisor killed the child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KillReason {
    Timeout,
    OutputLimit,
    Violation,
    /// The child broke protocol (the detail is in `Observed::protocol_error`).
    Protocol,
    /// The violation reporter failed: a sandbox whose violations cannot be seen is stopped.
    ReporterLost(String),
    /// R did not yield to an interrupt within the grace period.
    InterruptTimeout,
    /// The sandbox's processes together used more CPU than the limit (the meter).
    CpuLimit,
    /// The sandbox's processes together held more memory than the limit (the meter).
    MemoryLimit,
}

impl KillReason {
    /// Why, in a few words, for an error about a request between evaluations.
    pub(crate) fn describe(&self) -> String {
        match self {
            KillReason::Timeout => "time limit".into(),
            KillReason::OutputLimit => "output limit".into(),
            KillReason::Violation => "a forbidden system call".into(),
            KillReason::Protocol => "it broke protocol".into(),
            KillReason::ReporterLost(why) => format!("its violations could not be watched: {why}"),
            KillReason::InterruptTimeout => "it ignored an interrupt".into(),
            KillReason::CpuLimit => "CPU limit".into(),
            KillReason::MemoryLimit => "memory limit".into(),
        }
    }
}

/// How the child process ended, as the zygote reported it.
pub(crate) struct Exit {
    pub(crate) code: Option<i32>,
    pub(crate) signal: Option<i32>,
    pub(crate) cpu_ms: u64,
    pub(crate) max_rss_kb: u64,
}

pub(crate) struct Observed<'a> {
    pub(crate) killed: Option<KillReason>,
    pub(crate) evaluated: Option<ChildReport>,
    pub(crate) exit: Option<&'a Exit>,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
    pub(crate) violation: Option<i64>,
    pub(crate) protocol_error: Option<String>,
    pub(crate) wall_ms: u64,
    pub(crate) cpu_limit: Option<u64>,
    /// The deadline passed (R may have yielded to the interrupt that followed).
    pub(crate) timed_out: bool,
}

pub(crate) fn compose(o: Observed<'_>) -> EvalResult {
    let (code, signal) = o.exit.map_or((None, None), |e| (e.code, e.signal));
    let mut result = EvalResult {
        outcome: Outcome::Crashed,
        value: serde_json::Value::Null,
        value_typed: None,
        visible: false,
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        messages: Vec::new(),
        warnings: Vec::new(),
        error: None,
        syntax_error: None,
        violation: None,
        plots: Vec::new(),
        usage: Usage { wall_ms: o.wall_ms, ..Usage::default() },
        exit: ExitStatus { code, signal },
        layers: None,
        reset: false,
        reset_reason: None,
        tool_call_limit_exceeded: false,
        refused: false,
        files: Vec::new(),
        files_truncated: false,
        learning: None,
        network: Vec::new(),
        refused_network: false,
    };
    if let Some(e) = o.exit {
        result.usage.cpu_ms = e.cpu_ms;
        result.usage.max_rss_kb = e.max_rss_kb;
    }
    match o.evaluated {
        Some(ChildReport::Evaluated { r, plots, cpu_ms, max_rss_kb }) => {
            apply_r_result(&mut result, &r);
            result.plots = plots.into_iter().map(|data_base64| Plot { format: "png".into(), data_base64 }).collect();
            result.usage.cpu_ms = result.usage.cpu_ms.max(cpu_ms);
            result.usage.max_rss_kb = result.usage.max_rss_kb.max(max_rss_kb);
        }
        Some(ChildReport::Quit { status }) => {
            result.outcome = if status == 0 { Outcome::Ok } else { Outcome::Error };
            if status != 0 {
                result.error = Some(RError::new(format!("quit(status = {status})")));
            }
        }
        _ => {}
    }
    let violation = |nr: Option<i64>| Violation {
        syscall: nr.and_then(lockdown::seccomp::syscall_name).unwrap_or("unknown").to_string(),
        number: nr,
    };
    // Saturating: `--cpu` may be any number up to the hard limit (often unlimited), and
    // in milliseconds it overflowed (found by the `outcome` fuzz target).
    let cpu_exhausted = o.cpu_limit.is_some_and(|limit| result.usage.cpu_ms >= limit.saturating_mul(1000));
    // Order matters: what the supervisor saw first (a violation report, its own kill)
    // explains the death better than the signal that followed.
    result.outcome = match (o.violation, o.killed.clone()) {
        (Some(nr), _) => {
            result.violation = Some(violation(Some(nr)));
            Outcome::Violation
        }
        (None, Some(KillReason::Timeout)) => Outcome::Timeout,
        (None, Some(KillReason::CpuLimit)) => Outcome::CpuLimit,
        (None, Some(KillReason::MemoryLimit)) => {
            result.error = Some(RError::new("the sandbox's processes together held more memory than its limit"));
            Outcome::MemoryLimit
        }
        (None, Some(KillReason::OutputLimit)) => Outcome::OutputLimit,
        (None, Some(KillReason::Violation)) => {
            result.violation = Some(violation(None));
            Outcome::Violation
        }
        (None, Some(KillReason::Protocol)) => {
            let why = o.protocol_error.clone().unwrap_or_default();
            result.error = Some(RError::new(format!("the sandbox broke protocol: {why}")));
            Outcome::Crashed
        }
        (None, Some(KillReason::InterruptTimeout)) => {
            result.error = Some(RError::new(format!(
                "R did not yield to the interrupt within {:?}; the sandbox was stopped",
                super::INTERRUPT_GRACE
            )));
            Outcome::Interrupted
        }
        (None, Some(KillReason::ReporterLost(why))) => {
            result.error = Some(RError::new(format!("the sandbox was stopped: {why}")));
            Outcome::Crashed
        }
        (None, None) => match signal {
            Some(libc::SIGXCPU) => Outcome::CpuLimit,
            Some(libc::SIGKILL) if cpu_exhausted => Outcome::CpuLimit,
            Some(libc::SIGXFSZ) => Outcome::FileSizeLimit,
            Some(libc::SIGSYS) => {
                result.violation = Some(violation(None));
                Outcome::Violation
            }
            Some(_) => Outcome::Crashed,
            // R yielded to the interrupt that followed the deadline: a timeout, with the
            // session's state intact.
            None if o.timed_out && result.outcome == Outcome::Interrupted => Outcome::Timeout,
            // Still running or exited by itself: what R reported (`crashed` if nothing).
            None => result.outcome,
        },
    };
    if result.outcome == Outcome::Crashed && result.error.is_none() {
        let how = match (signal, code) {
            (Some(s), _) => format!("killed by signal {s} ({})", signal_name(s)),
            (None, Some(c)) => format!("exited with status {c} without reporting a result"),
            _ => "ended without a result".into(),
        };
        result.error = Some(RError::new(format!("the R process crashed: {how}")));
    }
    result
}

/// What the supervisor saw of a request, for the fuzz target (`fuzz/fuzz_targets/
/// outcome.rs`), which feeds [`compose_observed`] arbitrary child reports.
#[doc(hidden)]
#[derive(Clone, Debug, Default)]
pub struct SupervisorView {
    /// Its kill: 0 timeout, 1 output limit, 2 violation, 3 protocol, 4 reporter lost,
    /// 5 interrupt timeout, 6 CPU limit, 7 memory limit; anything else none.
    pub kill: Option<u8>,
    /// (code, signal, cpu_ms, max_rss_kb), as the zygote reports an exit.
    pub exit: Option<(Option<i32>, Option<i32>, u64, u64)>,
    pub violation: Option<i64>,
    pub protocol_error: Option<String>,
    pub cpu_limit: Option<u64>,
    pub timed_out: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// [`compose`] over a child's report (anything the child may send) and the supervisor's
/// own view: the whole path from what a child says to the result a client gets.
#[doc(hidden)]
pub fn compose_observed(report: Option<ChildReport>, view: SupervisorView) -> EvalResult {
    let killed = view.kill.and_then(|k| {
        Some(match k {
            0 => KillReason::Timeout,
            1 => KillReason::OutputLimit,
            2 => KillReason::Violation,
            3 => KillReason::Protocol,
            4 => KillReason::ReporterLost("fuzzed".into()),
            5 => KillReason::InterruptTimeout,
            6 => KillReason::CpuLimit,
            7 => KillReason::MemoryLimit,
            _ => return None,
        })
    });
    let exit = view.exit.map(|(code, signal, cpu_ms, max_rss_kb)| Exit { code, signal, cpu_ms, max_rss_kb });
    compose(Observed {
        killed,
        evaluated: report,
        exit: exit.as_ref(),
        stdout: view.stdout,
        stderr: view.stderr,
        violation: view.violation,
        protocol_error: view.protocol_error,
        wall_ms: 1,
        cpu_limit: view.cpu_limit,
        timed_out: view.timed_out,
    })
}

fn apply_r_result(result: &mut EvalResult, r: &serde_json::Value) {
    result.outcome = match r["status"].as_str() {
        Some("ok") => Outcome::Ok,
        Some("memory_limit") => Outcome::MemoryLimit,
        Some("process_limit") => Outcome::ProcessLimit,
        Some("interrupted") => Outcome::Interrupted,
        _ => Outcome::Error,
    };
    result.refused = r["status"].as_str() == Some("refused");
    result.value = r["value"].clone();
    result.value_typed = r.get("value_typed").filter(|v| !v.is_null()).cloned();
    result.visible = r["visible"].as_bool().unwrap_or(false);
    result.messages = serde_json::from_value(r["messages"].clone()).unwrap_or_default();
    result.warnings = serde_json::from_value(r["warnings"].clone()).unwrap_or_default();
    result.error = serde_json::from_value(r["error"].clone()).unwrap_or(None);
    if let Some(error) = &mut result.error {
        error.cap_trace();
    }
    result.syntax_error = serde_json::from_value(r["syntax_error"].clone()).unwrap_or(None);
    if let (Some(syntax), None) = (&result.syntax_error, &result.error) {
        result.error = Some(RError::new(syntax.message.clone()));
    }
}

/// A signal's conventional name.
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        libc::SIGPIPE => "SIGPIPE",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(killed: Option<KillReason>, exit: Option<&Exit>) -> Observed<'_> {
        Observed {
            killed,
            evaluated: None,
            exit,
            stdout: Vec::new(),
            stderr: Vec::new(),
            violation: None,
            protocol_error: None,
            wall_ms: 1,
            cpu_limit: Some(1),
            timed_out: false,
        }
    }

    #[test]
    fn a_lost_reporter_is_a_crash_that_says_why() {
        let r = compose(observed(Some(KillReason::ReporterLost("failed to receive".into())), None));
        assert_eq!(r.outcome, Outcome::Crashed);
        assert_eq!(r.error.unwrap().message, "the sandbox was stopped: failed to receive");
    }

    /// Fuzz regression (`fuzz/fuzz_targets/outcome.rs`): a CPU limit beyond what u64
    /// milliseconds hold panicked (debug) or wrapped to a tiny limit (release), making a
    /// killed child look like `cpu_limit`.
    #[test]
    fn a_huge_cpu_limit_does_not_overflow() {
        let exit = Exit { code: None, signal: Some(libc::SIGKILL), cpu_ms: 10, max_rss_kb: 0 };
        let mut o = observed(None, Some(&exit));
        o.cpu_limit = Some(u64::MAX / 999);
        assert_eq!(compose(o).outcome, Outcome::Crashed);
    }

    #[test]
    fn signals_name_their_limit() {
        let exit = |signal, cpu_ms| Exit { code: None, signal: Some(signal), cpu_ms, max_rss_kb: 0 };
        assert_eq!(compose(observed(None, Some(&exit(libc::SIGXCPU, 10)))).outcome, Outcome::CpuLimit);
        assert_eq!(compose(observed(None, Some(&exit(libc::SIGKILL, 1500)))).outcome, Outcome::CpuLimit);
        assert_eq!(compose(observed(None, Some(&exit(libc::SIGKILL, 10)))).outcome, Outcome::Crashed);
        assert_eq!(compose(observed(None, Some(&exit(libc::SIGXFSZ, 10)))).outcome, Outcome::FileSizeLimit);
        assert_eq!(
            compose(observed(Some(KillReason::Timeout), Some(&exit(libc::SIGKILL, 10)))).outcome,
            Outcome::Timeout
        );
    }
}
