//! What the supervisor makes of a child's report (`crates/rsandbox/src/child/outcome.rs`):
//! the report off the wire (any `ChildReport`, or any JSON as the R side's result of an
//! `evaluated` report) composed with the supervisor's own view of the request (its kill,
//! the exit the zygote reported, a violation, the CPU limit).
//!
//! Input: the supervisor's view (32 bytes, see [`view`]), then the frame body.
//! Checked: nothing panics; what the supervisor saw wins over anything the child says (a
//! reported violation is the outcome, with its number; its own kill names the outcome);
//! `violation` is set exactly when the outcome is one; a crash carries an error; the
//! result survives the JSON a client gets.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rsandbox::child::{compose_observed, SupervisorView};
use rsandbox::{EvalResult, Outcome};
use wire::frame;
use wire::messages::ChildReport;

/// Bytes of the view before the frame body.
const HEAD: usize = 32;

/// The supervisor's view from the first [`HEAD`] bytes: flags (bit 0 a kill, 1 an exit,
/// 2 a violation, 3 a CPU limit, 4 timed out, 5 an exit code, 6 a signal, 7 a protocol
/// error), the kill, the signal, the exit code, the CPU used, the CPU limit and the
/// violation's number (little-endian).
fn view(head: &[u8; HEAD]) -> SupervisorView {
    let flag = |bit: u32| head[0] & (1 << bit) != 0;
    let word = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().unwrap());
    let code = i32::from_le_bytes(head[3..7].try_into().unwrap());
    SupervisorView {
        kill: flag(0).then_some(head[1]),
        exit: flag(1).then(|| (flag(5).then_some(code), flag(6).then_some(i32::from(head[2])), word(7), word(7) >> 3)),
        violation: flag(2).then(|| word(23) as i64),
        protocol_error: flag(7).then(|| "a frame that was not JSON".to_string()),
        cpu_limit: flag(3).then(|| word(15)),
        timed_out: flag(4),
        stdout: head[..8].to_vec(),
        stderr: Vec::new(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((head, body)) = data.split_first_chunk::<HEAD>() else { return };
    let view = view(head);
    let report = match frame::decode::<ChildReport>(body) {
        Ok(report) => Some(report),
        // Any JSON at all as what R reported.
        Err(_) => frame::decode::<serde_json::Value>(body).ok().map(|r| ChildReport::Evaluated {
            r,
            plots: Vec::new(),
            cpu_ms: 0,
            max_rss_kb: 0,
        }),
    };
    let result = compose_observed(report, view.clone());

    if let Some(nr) = view.violation {
        assert_eq!(result.outcome, Outcome::Violation, "a reported violation is the outcome");
        assert_eq!(result.violation.as_ref().and_then(|v| v.number), Some(nr));
    } else if let Some(kill) = view.kill.filter(|k| *k < 8) {
        let want = [
            Outcome::Timeout,
            Outcome::OutputLimit,
            Outcome::Violation,
            Outcome::Crashed,
            Outcome::Crashed,
            Outcome::Interrupted,
            Outcome::CpuLimit,
            Outcome::MemoryLimit,
        ][usize::from(kill)];
        assert_eq!(result.outcome, want, "the supervisor's kill {kill} names the outcome");
    }
    assert_eq!(result.outcome == Outcome::Violation, result.violation.is_some());
    if result.outcome == Outcome::Crashed {
        assert!(result.error.is_some(), "a crash says what happened");
    }

    let json = serde_json::to_value(&result).expect("a result serializes");
    let back: EvalResult = serde_json::from_value(json.clone()).expect("a result deserializes");
    assert_eq!(serde_json::to_value(&back).unwrap(), json, "the JSON a client gets is the result");
});
