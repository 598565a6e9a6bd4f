//! The policy: plain data that says what a locked-down process may do.
//!
//! Build it, check it with [`Policy::validate`], then apply it in the child with
//! [`crate::apply`]. It is serde-friendly so a supervisor can send it to the process
//! that forks.

use crate::errors::PolicyError;
use serde::{Deserialize, Serialize};
use std::os::fd::RawFd;
use std::path::{Component, Path, PathBuf};

/// An unprivileged identity to switch to when the sandbox starts as root.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// Numeric user id (must not be 0).
    pub uid: u32,
    /// Numeric group id (must not be 0).
    pub gid: u32,
}

/// A disk quota: a private tmpfs of `bytes` mounted over `path` (the workspace).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceQuota {
    /// The workspace (must also be a read-write path).
    pub path: PathBuf,
    /// Size of the tmpfs.
    pub bytes: u64,
}

impl WorkspaceQuota {
    /// Bytes of quota per inode. Without an inode limit a tmpfs takes empty files until
    /// kernel memory runs out (a 16 MiB workspace pinned 1.5–2 GiB of inodes and
    /// dentries, roughly 1 KiB each); one inode per 4 KiB keeps that memory within about
    /// a quarter of the quota, and is more files than a workspace of real files fills.
    pub const BYTES_PER_INODE: u64 = 4096;
    /// At least this many inodes, so a small quota still holds R's own temporary files.
    pub const MIN_INODES: u64 = 1024;

    /// The tmpfs's inode limit for this quota.
    pub fn inodes(&self) -> u64 {
        (self.bytes / Self::BYTES_PER_INODE).max(Self::MIN_INODES)
    }
}

/// Resource limits; `None` leaves the inherited limit in place.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Bytes of address space the process may add to what it has when the lockdown
    /// runs (`RLIMIT_AS` = current size + this). A forked child inherits its parent's
    /// mappings, so an absolute limit would mean nothing to the user. A program started
    /// by [`crate::command::spawn`] starts from an empty address space: its
    /// `RLIMIT_AS` is this.
    pub memory: Option<u64>,
    /// CPU seconds (`RLIMIT_CPU`; SIGXCPU at the limit, SIGKILL a second later).
    pub cpu_seconds: Option<u64>,
    /// Largest file the process may write, in bytes (`RLIMIT_FSIZE`).
    pub file_size: Option<u64>,
    /// Processes for this uid (`RLIMIT_NPROC`). Meaningful only for a non-root uid,
    /// which is why root is always dropped to one.
    pub processes: Option<u64>,
    /// Open file descriptors (`RLIMIT_NOFILE`).
    pub open_files: Option<u64>,
    /// Stack size in bytes (`RLIMIT_STACK`).
    pub stack: Option<u64>,
}

/// Everything a locked-down process is allowed; anything not listed is denied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Trees readable (files and directories), not writable, not executable.
    /// Paths that do not exist are skipped: a missing path grants nothing.
    pub read_only: Vec<PathBuf>,
    /// Trees readable and writable (the workspace, `/dev/null`). Must exist.
    pub read_write: Vec<PathBuf>,
    /// Files that may be executed. Empty: `execve` is a violation.
    pub executable: Vec<PathBuf>,
    /// Network by proxy ([`crate::network`]): the sandbox gets a loopback-only network
    /// namespace of its own holding a listener that is handed (over `violation_fd`) to
    /// the supervisor's proxy, and may make TCP client sockets and connect to that
    /// listener's port only. Off: no socket can be created at all. Needs namespaces.
    pub network: bool,
    /// Resource limits.
    pub limits: Limits,
    /// Identity to switch to when started as root. `None` when not root.
    pub run_as: Option<Identity>,
    /// Create user (when not root), network, IPC and UTS namespaces when the kernel allows.
    pub namespaces: bool,
    /// Put the workspace on a private tmpfs of this size (needs namespaces).
    pub workspace_quota: Option<WorkspaceQuota>,
    /// With a workspace quota: `pivot_root` into a root holding only the policy's paths.
    pub private_root: bool,
    /// Run with whatever layers the kernel offers instead of refusing.
    pub best_effort: bool,
    /// fds below this number survive; every other inherited fd is closed.
    pub keep_fds_below: RawFd,
    /// A unix socket over which the seccomp user-notification listener is sent, so the
    /// holder learns of every forbidden call (and ends the sandbox). `None`: a forbidden
    /// call kills the calling process with SIGSYS.
    pub violation_fd: Option<RawFd>,
    /// Directories of which only some entries exist in the private root (an R library
    /// with only the allowed packages): the rest is not hidden but absent, so neither R
    /// nor native code can reach it. Needs the private root.
    #[serde(default)]
    pub visible_only: Vec<VisibleOnly>,
    /// Scheduling priority (nice, -20..=19) set before privileges are dropped, so root
    /// may also raise it; the sandbox may lower its priority further, never raise it.
    #[serde(default)]
    pub nice: Option<i32>,
    /// Learning mode (`rsandbox learn`, see [`crate::observe`]): file calls are reported
    /// on the violation listener too, and its holder answers forbidden calls (with an
    /// error: they are still never executed) instead of ending the sandbox. Started by
    /// an ordinary user the process stays dumpable, so that the holder (that user) can
    /// read the paths. Needs `violation_fd`.
    #[serde(default)]
    pub learning: bool,
}

/// A directory of which only `entries` exist inside the sandbox.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct VisibleOnly {
    /// The directory (absolute; it must lie in a read-only tree of the policy).
    pub dir: PathBuf,
    /// The names kept (plain names, no `/`).
    pub entries: Vec<String>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            read_only: Vec::new(),
            read_write: Vec::new(),
            executable: Vec::new(),
            network: false,
            limits: Limits::default(),
            run_as: None,
            namespaces: true,
            workspace_quota: None,
            private_root: false,
            best_effort: false,
            keep_fds_below: 3,
            violation_fd: None,
            visible_only: Vec::new(),
            nice: None,
            learning: false,
        }
    }
}

/// The devices a sandbox may open; no other file under `/dev` is reachable.
pub const READ_ONLY_DEVICES: [&str; 3] = ["/dev/zero", "/dev/random", "/dev/urandom"];
/// `/dev/null` must be writable: R's `sink(nullfile())` and shells redirect to it.
pub const READ_WRITE_DEVICES: [&str; 1] = ["/dev/null"];

impl Policy {
    /// Check the policy before any fork: paths absolute and `..`-free, writable paths
    /// present, limits non-zero, no identity of root.
    pub fn validate(&self) -> Result<(), PolicyError> {
        for path in self.read_only.iter().chain(&self.read_write).chain(&self.executable) {
            check_path(path)?;
        }
        for path in &self.read_write {
            if !path.exists() {
                return Err(PolicyError::MissingWritablePath { path: path.clone() });
            }
        }
        let l = &self.limits;
        for (name, value) in [
            ("memory", l.memory),
            ("cpu_seconds", l.cpu_seconds),
            ("file_size", l.file_size),
            ("processes", l.processes),
            ("open_files", l.open_files),
            ("stack", l.stack),
        ] {
            if value == Some(0) {
                return Err(PolicyError::ZeroLimit { name });
            }
        }
        if let Some(nice) = self.nice.filter(|n| !(-20..=19).contains(n)) {
            return Err(PolicyError::BadNice { nice });
        }
        if self.network && !self.namespaces {
            return Err(PolicyError::NetworkWithoutNamespaces);
        }
        if self.network && self.violation_fd.is_none() {
            return Err(PolicyError::NetworkWithoutReportSocket);
        }
        if self.learning && self.violation_fd.is_none() {
            return Err(PolicyError::LearningWithoutListener);
        }
        if !self.visible_only.is_empty() && !self.private_root {
            return Err(PolicyError::VisibleOnlyWithoutPrivateRoot);
        }
        for v in &self.visible_only {
            check_path(&v.dir)?;
            if let Some(bad) = v
                .entries
                .iter()
                .find(|e| e.is_empty() || *e == "." || *e == ".." || e.contains('/') || e.contains('\0'))
            {
                return Err(PolicyError::BadVisibleEntry { dir: v.dir.clone(), entry: bad.clone() });
            }
        }
        if let Some(quota) = &self.workspace_quota {
            check_path(&quota.path)?;
            if quota.bytes == 0 {
                return Err(PolicyError::ZeroLimit { name: "workspace_quota" });
            }
            if !self.read_write.contains(&quota.path) {
                return Err(PolicyError::MissingWritablePath { path: quota.path.clone() });
            }
        }
        if self.private_root && self.workspace_quota.is_none() {
            return Err(PolicyError::PrivateRootWithoutQuota);
        }
        if let Some(fd) = self.violation_fd {
            if fd >= self.keep_fds_below || fd < 0 {
                return Err(PolicyError::ViolationFdNotKept { fd, keep_fds_below: self.keep_fds_below });
            }
        }
        if let Some(id) = self.run_as {
            if id.uid == 0 || id.gid == 0 {
                return Err(PolicyError::RootIdentity);
            }
        }
        Ok(())
    }
}

/// A path is usable in a rule when it is absolute and has no `..` component.
pub fn check_path(path: &Path) -> Result<(), PolicyError> {
    let ok = path.is_absolute() && !path.components().any(|c| matches!(c, Component::ParentDir));
    if ok {
        Ok(())
    } else {
        Err(PolicyError::BadPath { path: path.to_path_buf() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_and_dotdot_paths_are_rejected() {
        let mut p = Policy { read_only: vec!["usr/lib".into()], ..Policy::default() };
        assert!(matches!(p.validate(), Err(PolicyError::BadPath { .. })));
        p.read_only = vec!["/usr/../etc".into()];
        assert!(matches!(p.validate(), Err(PolicyError::BadPath { .. })));
        p.read_only = vec!["/usr/lib".into()];
        p.validate().unwrap();
    }

    #[test]
    fn missing_workspace_is_rejected() {
        let p = Policy { read_write: vec!["/nonexistent/rsandbox-ws".into()], ..Policy::default() };
        assert!(matches!(p.validate(), Err(PolicyError::MissingWritablePath { .. })));
    }

    #[test]
    fn zero_limits_are_rejected_by_name() {
        let p = Policy { limits: Limits { cpu_seconds: Some(0), ..Limits::default() }, ..Policy::default() };
        match p.validate() {
            Err(PolicyError::ZeroLimit { name }) => assert_eq!(name, "cpu_seconds"),
            other => panic!("expected ZeroLimit, got {other:?}"),
        }
    }

    #[test]
    fn learning_needs_a_listener() {
        let p = Policy { learning: true, ..Policy::default() };
        assert!(matches!(p.validate(), Err(PolicyError::LearningWithoutListener)));
        Policy { learning: true, violation_fd: Some(4), keep_fds_below: 5, ..Policy::default() }.validate().unwrap();
    }

    #[test]
    fn the_network_needs_namespaces_and_a_report_socket() {
        let p =
            Policy { network: true, namespaces: false, violation_fd: Some(4), keep_fds_below: 5, ..Policy::default() };
        assert!(matches!(p.validate(), Err(PolicyError::NetworkWithoutNamespaces)));
        let p = Policy { network: true, ..Policy::default() };
        assert!(matches!(p.validate(), Err(PolicyError::NetworkWithoutReportSocket)));
        Policy { network: true, violation_fd: Some(4), keep_fds_below: 5, ..Policy::default() }.validate().unwrap();
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = serde_json::from_str::<Limits>(r#"{"memroy": 5}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `memroy`"), "{err}");
    }

    #[test]
    fn showing_only_some_entries_needs_the_private_root_and_plain_names() {
        let visible = |entries: &[&str]| {
            vec![VisibleOnly {
                dir: "/usr/lib/R/library".into(),
                entries: entries.iter().map(|e| e.to_string()).collect(),
            }]
        };
        let p = Policy { visible_only: visible(&["stats"]), ..Policy::default() };
        assert!(matches!(p.validate(), Err(PolicyError::VisibleOnlyWithoutPrivateRoot)));
        for bad in ["..", "a/b", ""] {
            let p = Policy { visible_only: visible(&[bad]), private_root: true, ..Policy::default() };
            assert!(matches!(p.validate(), Err(PolicyError::BadVisibleEntry { .. })), "{bad:?}: {:?}", p.validate());
        }
    }
}
