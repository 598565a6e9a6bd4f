//! The result of one evaluation, as every client sees it (the CLI's `--json`).

use serde::{Deserialize, Serialize};

/// How an evaluation ended: exactly one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The code ran to the end.
    Ok,
    /// R raised an error (or a syntax error stopped it before running).
    Error,
    /// Wall-clock deadline passed; everything was killed.
    Timeout,
    /// CPU seconds exhausted.
    CpuLimit,
    /// An allocation was refused by the memory limit.
    MemoryLimit,
    /// stdout + stderr + result exceeded the output limit.
    OutputLimit,
    /// A file grew past the file-size limit.
    FileSizeLimit,
    /// A fork was refused by the process limit.
    ProcessLimit,
    /// A forbidden system call; the sandbox was ended.
    Violation,
    /// The process died some other way (signal, abort, native crash).
    Crashed,
    /// Stopped by an interrupt (`Session::interrupt`), as Ctrl-C stops R: the session
    /// keeps its state.
    Interrupted,
}

impl Outcome {
    /// The CLI's exit status for this outcome (documented in the README).
    pub fn exit_code(self) -> i32 {
        match self {
            Outcome::Ok => 0,
            Outcome::Error => 1,
            Outcome::Timeout => 3,
            Outcome::CpuLimit => 4,
            Outcome::MemoryLimit => 5,
            Outcome::OutputLimit => 6,
            Outcome::FileSizeLimit => 7,
            Outcome::ProcessLimit => 8,
            Outcome::Violation => 9,
            Outcome::Crashed => 10,
            // As a shell reports a command ended by Ctrl-C.
            Outcome::Interrupted => 130,
        }
    }

    /// The snake_case name.
    pub fn name(self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
    }

    /// The limit this outcome says was reached, in words, whatever ran (R code or a
    /// program); `None` for outcomes whose words need the run's details (its error, its
    /// time limit, the call refused, the signal). The one wording of every front and of
    /// `rsandbox exec`.
    pub fn limit_reached(self) -> Option<&'static str> {
        match self {
            Outcome::CpuLimit => Some("the CPU time limit was reached"),
            Outcome::MemoryLimit => Some("the memory limit was reached"),
            Outcome::FileSizeLimit => Some("a file grew past the file size limit"),
            Outcome::ProcessLimit => Some("the process limit was reached"),
            _ => None,
        }
    }

    /// What ran past its time limit `limit`, in words ("the code ran past its time
    /// limit of 2 s").
    pub fn past_time_limit(what: &str, limit: std::time::Duration) -> String {
        format!("{what} ran past its time limit of {} s", limit.as_secs_f64())
    }
}

/// An R error.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RError {
    /// `conditionMessage(e)`.
    pub message: String,
    /// The call, deparsed; null for top-level errors.
    pub call: Option<String>,
    /// The calls that led to the error, outermost first, each deparsed to one line (as
    /// `traceback()` shows them, in the other order); absent when there are none (a
    /// syntax error, a limit). Text to show, never code to run: at most
    /// [`RError::MAX_TRACE`] calls (the innermost) of at most [`RError::MAX_TRACE_CHARS`]
    /// characters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trace: Vec<String>,
}

impl RError {
    /// Most calls a trace keeps (the innermost).
    pub const MAX_TRACE: usize = 30;
    /// Longest call in a trace, in characters.
    pub const MAX_TRACE_CHARS: usize = 200;

    /// An error with a message and nothing else.
    pub fn new(message: impl Into<String>) -> RError {
        RError { message: message.into(), ..RError::default() }
    }

    /// Hold the trace to its caps whatever the sandbox sent (it writes the result).
    pub fn cap_trace(&mut self) {
        let extra = self.trace.len().saturating_sub(Self::MAX_TRACE);
        self.trace.drain(..extra);
        for call in &mut self.trace {
            if call.chars().count() > Self::MAX_TRACE_CHARS {
                *call = call.chars().take(Self::MAX_TRACE_CHARS - 3).chain("...".chars()).collect();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RError;

    /// R reads a result's fields with `$`, which matches a name partially: where a field
    /// is absent, `result$network` would read a field named `network_…`. So a field that
    /// may be absent (not `required`) is the start of no other field's name, in a result
    /// or any of its parts.
    #[test]
    fn no_field_that_may_be_absent_is_the_start_of_another() {
        let schema = serde_json::to_value(schemars::schema_for!(super::EvalResult)).unwrap();
        let mut objects = vec![&schema];
        objects.extend(schema["$defs"].as_object().into_iter().flat_map(|defs| defs.values()));
        let mut hazards = Vec::new();
        for object in objects {
            let Some(properties) = object["properties"].as_object() else { continue };
            let required: Vec<&str> =
                object["required"].as_array().into_iter().flatten().filter_map(|n| n.as_str()).collect();
            for a in properties.keys().filter(|a| !required.contains(&a.as_str())) {
                for b in properties.keys().filter(|b| *b != a && b.starts_with(a.as_str())) {
                    hazards.push(format!("{b} begins with {a}, which may be absent"));
                }
            }
        }
        // Older pairs, kept for the clients that read them: `reset_reason` comes only
        // with `reset`; `files_truncated` can come without `files` (all files over the
        // output limit), where `result$files` reads `TRUE`: `result[["files"]]` is right.
        let older = [
            "reset_reason begins with reset, which may be absent",
            "files_truncated begins with files, which may be absent",
        ];
        hazards.retain(|h| !older.contains(&h.as_str()));
        assert!(hazards.is_empty(), "{hazards:?}");
    }

    #[test]
    fn a_trace_from_the_sandbox_is_held_to_its_caps() {
        let mut e = RError::new("x");
        e.trace = (0..100).map(|i| format!("f{i}()")).collect();
        e.trace.push("g".repeat(10_000));
        e.cap_trace();
        assert_eq!(e.trace.len(), RError::MAX_TRACE);
        assert_eq!(e.trace[0], "f71()", "the innermost calls are kept");
        let last = e.trace.last().unwrap();
        assert_eq!((last.chars().count(), last.ends_with("...")), (RError::MAX_TRACE_CHARS, true));
        let plain = serde_json::to_value(RError::new("y")).unwrap();
        assert!(plain.get("trace").is_none(), "an empty trace is not sent");
    }
}

/// A syntax error, found by R's parser before anything ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SyntaxError {
    /// R's message.
    pub message: String,
    /// 1-based line.
    pub line: Option<u32>,
    /// 1-based column.
    pub column: Option<u32>,
}

/// A warning.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RWarning {
    /// `conditionMessage(w)`.
    pub message: String,
    /// The call, deparsed.
    pub call: Option<String>,
}

/// The forbidden system call that ended the sandbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Violation {
    /// Its name (`"unknown"` when the process died by SIGSYS without a report).
    pub syscall: String,
    /// Its number on this architecture, when known.
    pub number: Option<i64>,
}

/// A plot the code drew.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Plot {
    /// Always `"png"`.
    #[schemars(extend("const" = "png"))]
    pub format: String,
    /// The file, base64.
    pub data_base64: String,
}

/// Measured resource use.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Usage {
    /// Wall-clock time from spawn request to result.
    pub wall_ms: u64,
    /// User + system CPU of the child and the processes it waited for.
    pub cpu_ms: u64,
    /// Peak resident set size.
    pub max_rss_kb: u64,
    /// How long this sandbox took to lock itself down (namespaces through seccomp),
    /// measured in the child; for a pre-forked child that was before the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lockdown_us: Option<u64>,
    /// CPU of all the sandbox's processes together (the meter), milliseconds, when it
    /// was sampled during the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_cpu_ms: Option<u64>,
    /// Peak memory of all the sandbox's processes together beyond its start (the
    /// meter), kilobytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_memory_kb: Option<u64>,
    /// How the meter read memory (`pss` or `rss`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_accounting: Option<crate::meter::MemoryAccounting>,
}

/// How the child process ended, for diagnosis.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ExitStatus {
    /// Exit code, when it exited.
    pub code: Option<i32>,
    /// Signal, when killed.
    pub signal: Option<i32>,
}

/// Everything one evaluation produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct EvalResult {
    /// How it ended.
    pub outcome: Outcome,
    /// The last visible value as JSON (see the README for the mapping): any JSON value.
    pub value: serde_json::Value,
    /// The same value in the typed encoding (`docs/protocol.md`, "Values"), when the
    /// request asked for it (`typed`) and there was a value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "crate::values::TypedResultValue")]
    pub value_typed: Option<serde_json::Value>,
    /// Whether the last top-level expression was visible.
    pub visible: bool,
    /// Everything written to stdout (auto-printed values included).
    pub stdout: String,
    /// Everything written to stderr (messages and warnings are captured separately).
    pub stderr: String,
    /// `message()` texts, in order.
    pub messages: Vec<String>,
    /// Warnings, in order.
    pub warnings: Vec<RWarning>,
    /// The R error, when `outcome` is `error` (or a limit that R reported as an error).
    pub error: Option<RError>,
    /// Set when a syntax error stopped the code before it ran.
    pub syntax_error: Option<SyntaxError>,
    /// Set when `outcome` is `violation`.
    pub violation: Option<Violation>,
    /// Plots drawn.
    pub plots: Vec<Plot>,
    /// Resource use.
    pub usage: Usage,
    /// How the child process ended, when it ended before the result was complete
    /// (a signal, a crash, `_exit`). Both fields are null when R finished normally: the
    /// process is then retired (killed) after the result is taken.
    pub exit: ExitStatus,
    /// The layers the child applied (absent when it never got that far).
    pub layers: Option<lockdown::Applied>,
    /// Sessions only: the session was replaced by a fresh one after this result
    /// (its state is gone; the next execute works).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reset: bool,
    /// Why it was reset: the outcome (`timeout`, `memory_limit`, `crashed`, ...),
    /// `quit` or `tool_call_limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_reason: Option<String>,
    /// The per-execute tool-call cap was hit (calls beyond it got an R error).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tool_call_limit_exceeded: bool,
    /// The function allowlist refused the code before it ran (the engine turns this
    /// into [`crate::InputError::NotAllowed`]; never part of a result a client sees).
    #[serde(skip)]
    pub refused: bool,
    /// Files of the workspace collected after the run (`EvalRequest::collect`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<WorkspaceFile>,
    /// Some files matching `collect` were left out: over the output limit in all, or
    /// beyond the 10 000 a listing carries.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub files_truncated: bool,
    /// Learning mode only ([`crate::config::EngineConfig::learning`]): what the code
    /// tried that the sandbox's policy refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learning: Option<LearningReport>,
    /// Network allowlist: every connection the sandbox opened to the proxy during this
    /// request, allowed or denied (empty, and absent from JSON, without a network).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<egress::ConnectionRecord>,
    /// The code tried to reach the network (made an internet socket) and this sandbox
    /// has none: the attempt failed as it does offline (R's own words: "Couldn't resolve
    /// host name", "cannot open URL"), and this says why. An R error's message then ends
    /// with [`EvalResult::NO_NETWORK`] too. Absent from JSON when false. (Not
    /// `network_…`: an R client's `result$network` would match it partially where the
    /// result has no `network`, and read `TRUE` for the connections.)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refused_network: bool,
}

impl EvalResult {
    /// Why a network attempt failed in a sandbox without the network, in the words every
    /// front shows (after an R error's message, and as a note where the code went on).
    pub const NO_NETWORK: &'static str = "this sandbox has no network: its profile gives it none, so every \
        connection is refused (a server's operator can allow hosts: the profile's [network] table)";
}

/// What a sandbox in learning mode tried that its policy refused, as the supervisor saw
/// it from the kernel (`lockdown::observe`): file calls the Landlock rules do not grant,
/// and forbidden system calls (answered with `EPERM`, never executed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LearningReport {
    /// Files and directories the code tried to read, write or run and may not, in the
    /// order first seen, each once.
    pub refused_files: Vec<RefusedFile>,
    /// Forbidden system calls the code made, by name, each once.
    pub refused_calls: Vec<String>,
    /// More was refused than a report holds ([`LearningReport::MAX_FILES`] files).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

impl LearningReport {
    /// Most refused files one report holds (paths are at most 4 KiB: the supervisor's
    /// memory stays bounded whatever the sandbox tries).
    pub const MAX_FILES: usize = 1000;
}

/// One refused file call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RefusedFile {
    /// The absolute path the code named (its working directory or directory fd
    /// resolved).
    pub path: String,
    /// `read`, `write` or `execute`.
    pub access: lockdown::observe::FileAccess,
}

/// A file from (or for) a sandbox's workspace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WorkspaceFile {
    /// Relative to the workspace.
    pub path: String,
    /// Bytes.
    pub size: u64,
    /// The content, base64.
    pub data_base64: String,
}

/// OpenAPI components (`docs/openapi.json`) for types whose schema is their `JsonSchema`
/// derive: utoipa learns the name here, and `fronts::core::schema::openapi` puts the
/// schemars schema under it, so the protocol schema and the OpenAPI document describe
/// each type once. The schema below is a placeholder the document never keeps.
#[cfg(feature = "openapi")]
macro_rules! openapi_components {
    ($($ty:ty),*) => {$(
        impl utoipa::PartialSchema for $ty {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::Object::new().into()
            }
        }

        impl utoipa::ToSchema for $ty {
            fn name() -> std::borrow::Cow<'static, str> {
                <$ty as schemars::JsonSchema>::schema_name()
            }
        }
    )*};
}

#[cfg(feature = "openapi")]
openapi_components!(EvalResult, WorkspaceFile, crate::Limits, crate::ToolSpec, crate::values::RValue);
