//! One error type per lockdown step, in the order [`crate::apply`] runs them, wrapped by
//! [`LockdownError`].
//!
//! "The policy is wrong" ([`PolicyError`]) stays apart from "the kernel refused or lacks
//! it" (every other variant), so callers can tell a user mistake from a host limitation.

use std::io;
use std::os::fd::RawFd;
use std::path::PathBuf;
use thiserror::Error;

/// A policy that cannot be applied as written.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A nice value outside the kernel's range.
    #[error("nice {nice} is outside -20..19")]
    BadNice {
        /// The value asked for.
        nice: i32,
    },
    /// Only some entries of a directory can be shown in a private root of the sandbox's
    /// own; without one the whole tree would be readable.
    #[error("showing only some packages (visible_only) needs the private root (namespaces and a disk quota)")]
    VisibleOnlyWithoutPrivateRoot,
    /// Learning mode reports on the violation listener, and there is none.
    #[error("learning mode needs a violation listener (violation_fd): without one nothing could be recorded")]
    LearningWithoutListener,
    /// An entry of `visible_only` is not a plain name.
    #[error("visible_only entry {entry:?} of {dir} is not a plain name")]
    BadVisibleEntry {
        /// The directory.
        dir: PathBuf,
        /// The entry.
        entry: String,
    },
    /// A read-write path must exist: it is the sandbox's own workspace.
    #[error("read-write path {path} does not exist")]
    MissingWritablePath {
        /// The missing path.
        path: PathBuf,
    },
    /// Paths must be absolute and free of `..` so rules mean what they say.
    #[error("path {path} must be absolute and contain no `..`")]
    BadPath {
        /// The offending path.
        path: PathBuf,
    },
    /// A limit of zero would make the sandbox unusable.
    #[error("limit {name} must be greater than zero")]
    ZeroLimit {
        /// The limit's name.
        name: &'static str,
    },
    /// The private root is built on the workspace tmpfs, so it needs a quota.
    #[error("private_root needs a workspace_quota")]
    PrivateRootWithoutQuota,
    /// The violation fd would be closed with the other inherited fds.
    #[error("violation_fd {fd} must be below keep_fds_below ({keep_fds_below})")]
    ViolationFdNotKept {
        /// The fd.
        fd: RawFd,
        /// The first fd closed.
        keep_fds_below: RawFd,
    },
    /// Dropping root to uid or gid 0 would drop nothing.
    #[error("run_as must name a non-root uid and gid")]
    RootIdentity,
    /// The network by proxy needs a network namespace of the sandbox's own: without one
    /// the sandbox would share the host's network.
    #[error("the network allowlist needs a network namespace of the sandbox's own, and namespaces are off; run with namespaces, or without a network allowlist")]
    NetworkWithoutNamespaces,
    /// The network by proxy sends its listener over the report socket, and there is none.
    #[error("the network allowlist needs a report socket (violation_fd) to hand its listener to the supervisor")]
    NetworkWithoutReportSocket,
    /// The seccomp filter could not be built.
    #[error("failed to build the seccomp filter: {0}")]
    Seccomp(String),
}

/// Step 1: process group, subreaper, parent-death signal, inherited fds; and the
/// non-dumpable flag, which `process` sets at the end of step 3.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ProcessError {
    /// `setpgid` failed.
    #[error("failed to create a process group (setpgid)")]
    ProcessGroup(#[source] io::Error),
    /// `prctl(PR_SET_CHILD_SUBREAPER)` failed.
    #[error("failed to become the subreaper of the sandbox's processes (prctl PR_SET_CHILD_SUBREAPER)")]
    Subreaper(#[source] io::Error),
    /// `prctl(PR_SET_PDEATHSIG)` failed.
    #[error("failed to set the parent-death signal (prctl PR_SET_PDEATHSIG)")]
    ParentDeathSignal(#[source] io::Error),
    /// The parent died before the death signal was armed.
    #[error("the parent exited before the sandbox was set up")]
    ParentGone,
    /// `close_range` failed.
    #[error("failed to close inherited fds (close_range)")]
    CloseFds(#[source] io::Error),
    /// `prctl(PR_SET_DUMPABLE)` failed.
    #[error("failed to mark the process non-dumpable (prctl PR_SET_DUMPABLE)")]
    Dumpable(#[source] io::Error),
}

/// Step 2: namespaces, and the mounts made in the mount namespace.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum NamespaceError {
    /// `unshare` failed.
    #[error("failed to create namespaces {what} (unshare)")]
    Unshare {
        /// The namespaces asked for.
        what: String,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// `/` is not a mount point (a plain `chroot`): its mounts cannot be made private, so
    /// a private root and a tmpfs workspace cannot be built without leaking mounts.
    #[error("namespaces layer: the root directory is not a mount point (a chroot?), so the sandbox's mounts cannot be kept from the host")]
    RootNotMountPoint,
    /// Writing the uid/gid map failed. Never passed over, best effort or not: the process
    /// is already in the user namespace, where it would run as the overflow id.
    #[error("namespaces layer: failed to write {file} for the new user namespace (a user namespace without id maps is an error even with best_effort)")]
    IdMap {
        /// The /proc file.
        file: &'static str,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
}

/// Step 2 (2c, `network.rs`): the network by proxy, in the new network namespace.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum NetworkError {
    /// No network namespace was made (the kernel refused one under best effort): the
    /// sandbox would share the host's network, so it does not run.
    #[error("network layer: the network allowlist needs a network namespace of the sandbox's own, and the kernel refused one (a container without CAP_SYS_ADMIN, or user namespaces off); the sandbox does not run with the host's network: allow namespaces, or run without a network allowlist")]
    NoNetworkNamespace,
    /// Bringing `lo` up failed.
    #[error("network layer: failed to bring up the loopback interface of the sandbox's network namespace (ioctl SIOCSIFFLAGS)")]
    Loopback(#[source] io::Error),
    /// Making the proxy listener failed.
    #[error("network layer: failed to make the proxy listener on 127.0.0.1 ({call})")]
    Listener {
        /// The system call.
        call: &'static str,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// Sending the listener to the supervisor failed.
    #[error("network layer: failed to send the proxy listener to the supervisor (sendmsg)")]
    Report(#[source] io::Error),
}

/// Step 3: priority, identity and privileges.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PrivilegeError {
    /// A `set*id`/`setgroups` call failed.
    #[error("failed to switch identity ({call})")]
    SetId {
        /// The system call.
        call: &'static str,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// A capability call failed.
    #[error("failed to drop capabilities ({call})")]
    Capabilities {
        /// The system call.
        call: &'static str,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// After the drop, the process still holds something it should not.
    #[error("privilege drop did not hold: {0}")]
    Verification(String),
    /// `prctl(PR_SET_NO_NEW_PRIVS)` failed.
    #[error("failed to set no_new_privs (prctl PR_SET_NO_NEW_PRIVS)")]
    NoNewPrivs(#[source] io::Error),
    /// `setpriority` failed (a negative nice needs root).
    #[error("failed to set the scheduling priority to nice {nice} (setpriority; a negative value needs root)")]
    Priority {
        /// The value asked for.
        nice: i32,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
}

/// Step 4: Landlock.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LandlockError {
    /// The ruleset could not be built or enforced.
    #[error("failed to enforce the Landlock ruleset: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    /// A path in the policy could not be opened.
    #[error("failed to open {path} for a Landlock rule")]
    Path {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A path opened for a rule could not be examined (`fstat`).
    #[error("failed to examine {path} for a Landlock rule (fstat)")]
    Stat {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The ruleset's fd could not be duplicated, to add rules to it directly (`dup`).
    #[error("failed to duplicate the Landlock ruleset's fd")]
    RulesetFd(#[source] std::io::Error),
    /// A rule could not be added (`landlock_add_rule`).
    #[error("failed to add the Landlock rule for {path}")]
    AddRule {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The kernel enforced nothing and the policy required Landlock.
    #[error("the kernel does not enforce Landlock (ABI {kernel_abi}, need {required_abi}); pass best-effort to run without it")]
    NotEnforced {
        /// What the kernel offers (0 = none).
        kernel_abi: i32,
        /// What the policy needs.
        required_abi: i32,
    },
}

/// Step 5: resource limits (after Landlock, which needs one fd per rule).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RlimitError {
    /// `setrlimit` failed.
    #[error("failed to set {name} to {value} (setrlimit)")]
    Set {
        /// The limit's name, e.g. `RLIMIT_AS`.
        name: &'static str,
        /// The value asked for.
        value: u64,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// Reading the current address-space size failed.
    #[error("failed to read the current address-space size from /proc/self/statm")]
    Baseline(#[source] io::Error),
}

/// Step 6: seccomp.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SeccompError {
    /// Sending the notification listener to the supervisor failed.
    #[error("failed to send the seccomp listener to the supervisor (sendmsg)")]
    Report(#[source] io::Error),
    /// Installing a filter failed.
    #[error("failed to install the seccomp filter: {0}")]
    Install(String),
}

/// Any failure while locking a process down.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LockdownError {
    /// See [`PolicyError`].
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// See [`ProcessError`].
    #[error(transparent)]
    Process(#[from] ProcessError),
    /// See [`NamespaceError`].
    #[error(transparent)]
    Namespace(#[from] NamespaceError),
    /// See [`NetworkError`].
    #[error(transparent)]
    Network(#[from] NetworkError),
    /// See [`PrivilegeError`].
    #[error(transparent)]
    Privilege(#[from] PrivilegeError),
    /// See [`LandlockError`].
    #[error(transparent)]
    Landlock(#[from] LandlockError),
    /// See [`RlimitError`].
    #[error(transparent)]
    Rlimit(#[from] RlimitError),
    /// See [`SeccompError`].
    #[error(transparent)]
    Seccomp(#[from] SeccompError),
}
