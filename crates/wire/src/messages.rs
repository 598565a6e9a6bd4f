//! The messages of the three processes.
//!
//! * supervisor <-> zygote: one JSON message per `SOCK_SEQPACKET` packet, with fds
//!   passed alongside ([`crate::seqpacket`]);
//! * supervisor <-> sandbox child: length-prefixed JSON frames on a `SOCK_STREAM`
//!   socketpair created before the fork ([`crate::frame`]).
//!
//! Every enum refuses unknown fields: a message that does not parse exactly is a
//! protocol error, never half-understood.

use lockdown::{Applied, Policy};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Supervisor to zygote.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ZygoteRequest {
    /// Fork a sandbox child. Carries four fds, in order: the child's channel, stdout and
    /// stderr write ends, violation-report write end.
    Spawn {
        /// Request id, echoed in the replies.
        req: u64,
        /// The lockdown the child applies to itself.
        policy: Policy,
        /// The child's private workspace (its cwd, HOME and TMPDIR).
        workspace: PathBuf,
        /// Environment of the child, complete (nothing else is inherited).
        env: Vec<(String, String)>,
        /// Host tools to define in the child, before it reports `LockedDown`.
        tools: Vec<ToolStub>,
        /// Evaluate `1 + 1` once before the lockdown (output to the zygote's
        /// `/dev/null`), so that a child forked ahead of its request has already copied
        /// the pages an evaluation writes: its first request does not pay for them.
        warm_up: bool,
    },
}

/// What the child needs to know about a host tool: its name and argument names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolStub {
    /// The R function name.
    pub name: String,
    /// Its formal arguments, in order.
    pub args: Vec<String>,
}

/// Number of fds a [`ZygoteRequest::Spawn`] carries.
pub const SPAWN_FDS: usize = 4;

/// Zygote to supervisor.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum ZygoteEvent {
    /// R is up; sent once at start-up.
    Ready {
        /// `R.version.string`.
        r_version: String,
        /// `R.home()`.
        r_home: PathBuf,
        /// `.libPaths()`.
        library_paths: Vec<PathBuf>,
        /// R's own trees outside `r_home` as R names them (`R_SHARE_DIR`, `R_DOC_DIR`,
        /// `R_INCLUDE_DIR` and their paths), e.g. `/usr/share/R/share` on Debian.
        r_directories: Vec<(String, PathBuf)>,
        /// Packages loaded before forking.
        preloaded: Vec<String>,
    },
    /// R failed to start or a preload failed; the zygote exits after this.
    StartFailed {
        /// What went wrong.
        error: String,
    },
    /// A child was forked; a pidfd for it travels with this message.
    Spawned {
        /// Request id.
        req: u64,
        /// The child's pid (also its process group).
        pid: i32,
    },
    /// The fork failed.
    SpawnFailed {
        /// Request id.
        req: u64,
        /// Why.
        error: String,
        /// The machine's capacity (no process, memory or descriptor free for the fork),
        /// not a fault of the request: the supervisor tells it as such (`busy`), and the
        /// same request may succeed later. Absent in a zygote's message before this field.
        #[serde(default)]
        capacity: bool,
    },
    /// A child has exited and everything in its process group has been killed.
    Exited {
        /// Request id.
        req: u64,
        /// Exit code, when it exited.
        code: Option<i32>,
        /// Terminating signal, when killed.
        signal: Option<i32>,
        /// User + system CPU time of the child and its waited-for descendants.
        cpu_ms: u64,
        /// Peak resident set size.
        max_rss_kb: u64,
    },
}

/// Supervisor to child.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ChildRequest {
    /// Evaluate code (state persists to the next `Eval` in a session).
    Eval {
        /// R source code.
        code: String,
        /// Send messages and warnings as `Output` reports while the code runs (stdout
        /// and stderr stream through their pipes either way).
        #[serde(default)]
        stream: bool,
        /// `commandArgs()` for this evaluation (as `Rscript FILE ARGS…` would set it);
        /// empty: unchanged.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
        /// Print visible values as a console does (`true`), or evaluate silently with
        /// the last value returned whether visible or not (`false`, as `eval()` would).
        #[serde(default = "echo_default", skip_serializing_if = "is_echo_default")]
        echo: bool,
        /// The profile's function allowlist (names; sets already expanded): code runs
        /// where only these exist, after a static pass refuses calls of anything else.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        functions: Option<Vec<String>>,
        /// Values bound in the code's environment before it runs: name to a value in
        /// the typed encoding (`docs/protocol.md`, "Values"), decoded as data by
        /// `eval.R` (never parsed or evaluated). Empty: none.
        #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
        globals: serde_json::Map<String, serde_json::Value>,
        /// Also return the value in the typed encoding (`value_typed` of the R result).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        typed: bool,
    },
    /// Write a file into the workspace (parents created); answered with `FileWritten`.
    PutFile {
        /// Relative to the workspace; no `..`, no symlinks on the way.
        path: String,
        /// The content, base64.
        data_base64: String,
    },
    /// Read a regular file of the workspace; answered with `FileContent`.
    GetFile {
        /// Relative to the workspace; no `..`, no symlinks on the way.
        path: String,
        /// Larger files are refused.
        max_bytes: u64,
    },
    /// List the workspace's regular files (symlinks not followed); answered with `FileList`.
    ListFiles,
    /// Save the global environment (and the attached packages' names); answered with
    /// `Snapshot`. The bytes are R's serialization, produced and only ever read in a
    /// sandbox: the supervisor treats them as opaque.
    Snapshot,
    /// Load a snapshot into the global environment; answered with `Restored`.
    Restore {
        /// A `Snapshot`'s bytes, base64.
        data_base64: String,
    },
    /// Define host tools as R functions (a pre-forked child becoming a session's);
    /// answered with `ToolsDefined`.
    DefineTools {
        /// Tool names and argument names (checked again by the child).
        tools: Vec<ToolStub>,
    },
    /// Collect the garbage of the child's warm-up (`rsandbox_collect_young` in the
    /// zygote's `eval.R` says why), while the child waits idle with nobody asking for it;
    /// answered with `Settled`.
    Settle,
    /// The answer to a `ToolCall`.
    ToolReply {
        /// The call id.
        call: u64,
        /// The value (JSON), when the tool succeeded.
        value: Option<serde_json::Value>,
        /// The error text, when it failed or was refused.
        error: Option<String>,
    },
}

/// Child to supervisor.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ChildReport {
    /// The lockdown could not be applied; nothing ran.
    SetupFailed {
        /// The error chain.
        error: String,
    },
    /// Layers applied, user code about to run.
    LockedDown {
        /// What was enforced.
        applied: Applied,
        /// How long `lockdown::apply` took in the child (namespaces through seccomp), µs.
        lockdown_us: u64,
    },
    /// Evaluation finished.
    Evaluated {
        /// The R side's JSON result (see `eval.R`).
        r: serde_json::Value,
        /// PNG files drawn, base64.
        plots: Vec<String>,
        /// CPU used by the child (and its waited-for children) so far.
        cpu_ms: u64,
        /// Peak resident set size so far.
        max_rss_kb: u64,
    },
    /// User code called a host tool; the child waits for a `ToolReply`.
    ToolCall {
        /// Call id, unique within the child.
        call: u64,
        /// Tool name.
        tool: String,
        /// Arguments, as JSON (an object).
        args: serde_json::Value,
    },
    /// The tools of a `DefineTools` request exist now.
    ToolsDefined,
    /// A `DefineTools` request failed; the child can no longer be trusted to serve.
    ToolsFailed {
        /// Why.
        error: String,
    },
    /// `Settle` done.
    Settled,
    /// A message or warning, while the code runs (`Eval` with `stream`).
    Output {
        /// `message` or `warning`.
        stream: String,
        /// The text, as R would print it.
        text: String,
    },
    /// `PutFile` done.
    FileWritten {
        /// Bytes written.
        size: u64,
    },
    /// `GetFile`'s answer.
    FileContent {
        /// Bytes.
        size: u64,
        /// The content, base64.
        data_base64: String,
    },
    /// `ListFiles`' answer.
    FileList {
        /// Regular files, paths relative to the workspace, sorted.
        files: Vec<FileEntry>,
        /// More files exist than a listing carries.
        truncated: bool,
    },
    /// `Snapshot`'s answer.
    Snapshot {
        /// R's serialization of the global environment, base64 (opaque outside a sandbox).
        data_base64: String,
        /// Objects that cannot travel (connections, external pointers), left out.
        not_saved: Vec<String>,
    },
    /// `Restore` done.
    Restored {
        /// What R warned about (packages that could not be attached…).
        warnings: Vec<String>,
    },
    /// A file or snapshot request was refused; the child still serves.
    Refused {
        /// Why.
        error: String,
    },
    /// User code called `q()`/`quit()`.
    Quit {
        /// The status it asked for.
        status: i32,
    },
}

/// A file in a workspace listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// Relative to the workspace.
    pub path: String,
    /// Bytes.
    pub size: u64,
}

/// The most files one listing carries.
pub const MAX_LISTED_FILES: usize = 10_000;

fn echo_default() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_echo_default(echo: &bool) -> bool {
    *echo
}
