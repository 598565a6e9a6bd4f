//! Engine-wide configuration, fixed when the zygote starts: what every sandbox of one
//! engine shares (its profile, identity, namespaces, pre-forking). Per-evaluation limits
//! are [`crate::options`]'.

use crate::errors::{EngineError, InputError};
use std::path::PathBuf;

/// Engine-wide settings, fixed when the zygote starts.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Packages loaded in the zygote before any fork (shared copy-on-write).
    pub preload: Vec<String>,
    /// The zygote binary; default: `rsandbox-zygote` beside the current executable or
    /// `$RSANDBOX_ZYGOTE`.
    pub zygote_path: Option<PathBuf>,
    /// Run with whatever layers the kernel offers instead of refusing.
    pub best_effort: bool,
    /// Create namespaces (user/net/ipc/uts) for each child when the kernel allows.
    pub namespaces: bool,
    /// Where workspaces are created (default: the system temp dir).
    pub workspace_root: Option<PathBuf>,
    /// First uid of the range used when started as root (one uid per live sandbox).
    pub uid_base: u32,
    /// Append audit records (JSONL) to this file.
    pub audit_log: Option<PathBuf>,
    /// Warm graphics and the evaluation path in the zygote (about 170 ms at start-up)
    /// so that every child starts fast. Off only for an engine that forks once.
    pub warm: bool,
    /// Children kept forked, locked down and warmed up ahead of requests, per limit set
    /// in use (`eval` and new sessions take one instead of forking). 0: fork per request,
    /// right for an engine that serves one evaluation.
    pub prefork: usize,
    /// The workspace quotas of all live sandboxes together (a tmpfs workspace is host
    /// memory once filled); a sandbox that would exceed it is refused. Default: half
    /// the machine's memory.
    pub max_total_disk: Option<u64>,
    /// Run every sandbox as this uid/gid (root only) instead of a fresh uid per
    /// sandbox ([`crate::identity`]).
    pub run_as: Option<crate::identity::RunAs>,
    /// Scheduling priority of every sandbox (nice, -20..=19; negative needs root).
    pub nice: Option<i32>,
    /// The policy profile (`strict` by default): extra read paths and the package
    /// allowlist for every sandbox (its limits and preload are applied by the caller).
    pub profile: crate::profile::Profile,
    /// Learning mode, for [`crate::learn`] only: each sandbox reports its file calls, and
    /// a forbidden call is answered with an error and listed in the result
    /// ([`crate::result::EvalResult::learning`]) instead of ending the sandbox
    /// (`lockdown::observe`).
    pub learning: bool,
}

impl EngineConfig {
    /// The fixed identity asked for, checked ([`crate::identity::RunAs::checked`]), and
    /// the nice value's range; `None` when each sandbox gets a fresh uid.
    pub fn checked_identity(&self) -> Result<Option<lockdown::Identity>, EngineError> {
        if let Some(nice) = self.nice.filter(|n| !(-20..=19).contains(n)) {
            return Err(InputError::BadLimit {
                what: "--nice".into(),
                value: format!("{nice} (the range is -20..19)"),
            }
            .into());
        }
        self.run_as.map(|r| r.checked()).transpose()
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            preload: Vec::new(),
            zygote_path: None,
            best_effort: false,
            namespaces: true,
            workspace_root: None,
            uid_base: 2_000_000_000,
            run_as: None,
            nice: None,
            audit_log: None,
            warm: true,
            prefork: 0,
            max_total_disk: None,
            profile: crate::profile::Profile::strict(),
            learning: false,
        }
    }
}
