//! What this kernel offers, for `rsandbox check` and for deciding whether a strict
//! policy can run at all.

use crate::ruleset::REQUIRED_ABI_NUMBER;
use crate::sys;
use serde::{Deserialize, Serialize};

/// The layers this machine offers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// Landlock ABI version of the kernel (0: none).
    pub landlock_abi: i32,
    /// The ABI the full policy needs.
    pub landlock_required_abi: i32,
    /// seccomp filters are available.
    pub seccomp: bool,
    /// A process can create namespaces: as root directly, otherwise through a user namespace.
    pub namespaces: bool,
    /// Running as root: the sandbox will drop to an unprivileged uid.
    pub root: bool,
    /// A writable cgroup v2 hierarchy is mounted (not used yet; reported for operators).
    pub cgroup_v2_writable: bool,
}

impl Probe {
    /// Whether every layer of a strict (non best-effort) policy can be applied.
    pub fn strict_policy_possible(&self) -> bool {
        self.landlock_abi >= self.landlock_required_abi && self.seccomp
    }
}

/// Look at the running kernel. Forks once to try namespaces without touching this process.
pub fn probe() -> Probe {
    let root = sys::effective_uid() == 0;
    Probe {
        landlock_abi: sys::landlock_abi_version(),
        landlock_required_abi: REQUIRED_ABI_NUMBER,
        seccomp: sys::seccomp_available(),
        namespaces: namespaces_work(root),
        root,
        cgroup_v2_writable: cgroup_v2_writable(),
    }
}

fn namespaces_work(root: bool) -> bool {
    // SAFETY: the child only calls async-signal-safe functions (unshare, _exit) and the
    // closure below, which allocates only when not root (the fs writes); probe() runs
    // before the caller starts threads of its own or from a single-threaded CLI.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => false,
        0 => {
            let ok = crate::namespaces::enter_namespaces(root, false, false).is_ok();
            sys::exit_immediately(if ok { 0 } else { 1 })
        }
        child => {
            let mut status = 0;
            // SAFETY: waiting for our own child with a valid status pointer.
            let rc = unsafe { libc::waitpid(child, &mut status, 0) };
            rc == child && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
        }
    }
}

fn cgroup_v2_writable() -> bool {
    // A probe: unreadable mounts mean "no writable cgroup v2 found", which is what it reports.
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.len() > 3
            && fields[2] == "cgroup2"
            && fields[3].starts_with("rw")
            && std::fs::metadata(fields[1]).map(|m| !m.permissions().readonly()).unwrap_or(false)
            && sys::access_writable(fields[1])
    })
}
