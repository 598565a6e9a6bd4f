//! Lock a freshly forked Linux process down, irreversibly, before it runs untrusted code.
//!
//! `lockdown` knows nothing of R. A [`Policy`] says what the process may read, write and
//! execute, its resource limits and identity; [`apply`] enforces it in this order, each
//! step a named function with its own error type (before step 1 the policy is checked
//! and the address-space size the memory limit adds to is read: step 5 needs it, and
//! Landlock closes `/proc`):
//!
//! 1. [`process`]: own process group, subreaper of its descendants, SIGKILL on parent
//!    death, inherited fds closed.
//! 2. [`namespaces`]: user (when not root), net, ipc, uts; then [`mounts`]: a private
//!    size-limited tmpfs over the workspace (the disk quota), and optionally a private
//!    root holding only the policy's paths, when asked; then [`network`]: with the
//!    network by proxy, `lo` up and the proxy's listener made and handed over.
//! 3. [`privileges`]: the nice value first (a negative one needs root's capabilities);
//!    root drops to an unprivileged uid/gid; securebits locked; capabilities and
//!    bounding set emptied; `no_new_privs`; then non-dumpable (only now: earlier it
//!    would lock the user namespace's id maps).
//! 4. [`ruleset`]: Landlock filesystem, TCP and scope rules.
//! 5. [`rlimits`]: after Landlock, which needs one fd per rule, so a small open-files
//!    limit cannot break the ruleset.
//! 6. [`seccomp`]: last, so that nothing above needs a call the filter forbids.
//!
//! ```
//! use lockdown::{Limits, Policy, SeccompFilters};
//!
//! // Build and check a policy, and compile its filters, before any fork.
//! let policy = Policy {
//!     read_only: vec!["/usr".into(), "/lib".into()],
//!     limits: Limits { cpu_seconds: Some(5), processes: Some(16), ..Limits::default() },
//!     ..Policy::default()
//! };
//! policy.validate()?;
//! let filters = SeccompFilters::build(policy.seccomp_profile())?;
//! assert!(filters.instruction_count() > 0);
//! // In the freshly forked child: lockdown::apply(&policy, &filters, parent_pid)
//! # Ok::<(), lockdown::errors::PolicyError>(())
//! ```
//!
//! # Compatibility
//! Linux only. The full policy needs Landlock ABI 6 (Linux 6.12) and seccomp; when either
//! is missing [`apply`] fails unless [`Policy::best_effort`] is set, and then
//! [`Applied`] says what was enforced. Namespaces are taken when the kernel allows; a
//! user namespace entered but left without id maps is an error even with best effort.
//! The seccomp program is generated in Rust (`bpf`); libseccomp ≥ 2.5 (`libseccomp-dev`
//! and `pkg-config` on Debian) is needed only by the tests, which compare the program
//! with libseccomp's.
//!
//! # Threads
//! Landlock and seccomp apply to the calling thread and the threads it starts later.
//! Call [`apply`] in a single-threaded, freshly forked child before any thread exists.
//!
//! # Test strategy
//! Policy building and filter compilation are tested without a kernel (unit tests).
//! Every layer is tested against the kernel in forked children (`tests/layers.rs`),
//! asserting the exact errno or signal, as root and as an unprivileged user.
#![deny(missing_docs)]

pub mod bpf;
pub mod command;
pub mod errors;
pub mod fdpass;
pub mod mounts;
pub mod namespaces;
pub mod network;
pub mod observe;
pub mod policy;
pub mod privileges;
pub mod probe;
pub mod process;
pub mod rlimits;
pub mod root_template;
pub mod ruleset;
pub mod seccomp;
mod sys;

pub use errors::LockdownError;
pub use policy::{Identity, Limits, Policy, VisibleOnly, WorkspaceQuota};
pub use probe::{probe, Probe};
pub use ruleset::LandlockEnforcement;
pub use seccomp::{SeccompFilters, SeccompProfile};

use serde::{Deserialize, Serialize};

/// What [`apply`] enforced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema), schemars(deny_unknown_fields))]
pub struct Applied {
    /// Namespaces created.
    pub namespaces: Vec<String>,
    /// Size of the private tmpfs workspace, when one was mounted.
    #[serde(default)]
    pub workspace_quota: Option<u64>,
    /// The process lives in a private root holding only the policy's paths.
    #[serde(default)]
    pub private_root: bool,
    /// Identity switched to (when started as root).
    pub identity: Option<Identity>,
    /// Landlock enforcement.
    pub landlock: LandlockEnforcement,
    /// seccomp filters installed.
    pub seccomp: bool,
    /// The nice value set (`None`: inherited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nice: Option<i32>,
    /// Files and trees with Landlock's execute right (0: no program can run, `execve`
    /// is a violation).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub programs: usize,
    /// Learning mode ([`Policy::learning`]): forbidden calls are answered with an error
    /// and listed, not fatal, and file calls are reported.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub learning: bool,
    /// Network by proxy ([`Policy::network`]): the port of the listener handed to the
    /// supervisor, the only one the sandbox may connect to (on 127.0.0.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_port: Option<u16>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Policy {
    /// The seccomp profile this policy needs.
    pub fn seccomp_profile(&self) -> SeccompProfile {
        SeccompProfile {
            exec: !self.executable.is_empty(),
            network: self.network,
            observe: self.learning,
            private_root: self.private_root && self.workspace_quota.is_some(),
            // Learning answers every notification itself (and lists refusals its own way).
            report_network: !self.network && !self.learning && self.violation_fd.is_some(),
        }
    }
}

/// Lock the calling process down. `filters` must come from
/// `SeccompFilters::build(policy.seccomp_profile())`; `parent` is the pid that forked us.
pub fn apply(policy: &Policy, filters: &SeccompFilters, parent: libc::pid_t) -> Result<Applied, LockdownError> {
    apply_with_root(policy, filters, parent, None)
}

/// What the memory limit ([`Limits::memory`]) is counted from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MemoryBaseline {
    /// The caller's address space when the lockdown runs: a forked child keeps its
    /// parent's mappings (R's heap in a zygote child), so the limit is what it may add.
    CurrentSize,
    /// Nothing: the caller executes a program next (`command::spawn`), and `execve`
    /// replaces the address space, so the program's whole address space is the limit
    /// (as `prlimit --as` sets it), however large the process that forked it.
    Exec,
}

/// [`apply_with_root`] in a process that executes a program right after (see
/// [`MemoryBaseline::Exec`]); `joined_shared`: it joined pinned empty network, IPC and
/// UTS namespaces ([`namespaces::PinnedNamespaces::join`]), which it then keeps.
pub(crate) fn apply_before_exec(
    policy: &Policy,
    filters: &SeccompFilters,
    parent: libc::pid_t,
    root: Option<&root_template::RootTemplate>,
    joined_shared: bool,
) -> Result<Applied, LockdownError> {
    apply_counting_memory_from(policy, filters, parent, root, MemoryBaseline::Exec, joined_shared)
}

/// [`apply`], with the private root copied from `root` when it fits the policy (see
/// [`root_template`]: as root from a template built as root, without root from one built
/// without), instead of built here. `root`'s fds are kept open through step 1 and closed
/// once the mount namespace is made, used or not: the caller must not close them again.
pub fn apply_with_root(
    policy: &Policy,
    filters: &SeccompFilters,
    parent: libc::pid_t,
    root: Option<&root_template::RootTemplate>,
) -> Result<Applied, LockdownError> {
    apply_counting_memory_from(policy, filters, parent, root, MemoryBaseline::CurrentSize, false)
}

fn apply_counting_memory_from(
    policy: &Policy,
    filters: &SeccompFilters,
    parent: libc::pid_t,
    root: Option<&root_template::RootTemplate>,
    baseline: MemoryBaseline,
    joined_shared: bool,
) -> Result<Applied, LockdownError> {
    policy.validate()?;
    let as_root = sys::effective_uid() == 0;
    if as_root && policy.run_as.is_none() {
        return Err(errors::PolicyError::RootIdentity.into());
    }
    let address_space_now = match baseline {
        MemoryBaseline::CurrentSize => rlimits::current_address_space()?,
        MemoryBaseline::Exec => 0,
    };

    let kept = root.map(root_template::RootTemplate::fds).unwrap_or_default();
    let opened_paths = root.map(root_template::RootTemplate::opened_paths).unwrap_or_default();
    let kept_through_landlock: Vec<std::os::fd::RawFd> = opened_paths.iter().map(ruleset::OpenedPath::raw_fd).collect();
    process::isolate_process(policy.keep_fds_below, &[&kept[..], &kept_through_landlock[..]].concat(), parent)?;
    let identity = if as_root { policy.run_as } else { None };
    // Root without CAP_SYS_ADMIN (a container's root) cannot create the namespaces
    // itself: it becomes the sandbox's uid first and creates them as an ordinary user
    // does, where the runtime allows user namespaces (podman's profile does). Nice first:
    // a negative value needs root's capability.
    let early_identity = match identity {
        Some(id) if policy.namespaces && !privileges::can_create_namespaces().map_err(capget_error)? => {
            if let Some(nice) = policy.nice {
                sys::set_nice(nice).map_err(|source| errors::PrivilegeError::Priority { nice, source })?;
            }
            privileges::become_identity_before_namespaces(id)?;
            true
        }
        _ => false,
    };
    // Root's privileges for the namespace and mount steps: not after an early switch.
    let root_makes_namespaces = as_root && !early_identity;
    // A private root copied from the zygote's template (see `root_template`): as root, or
    // without root from one built without root; never after an early switch.
    let template = root.filter(|t| t.fits(policy) && t.without_root() != as_root && !early_identity);
    let namespaces = match template {
        Some(template) if !as_root => template.enter_without_root()?,
        _ if policy.namespaces => {
            let in_shared = joined_shared || namespaces::in_shared_empty_namespaces();
            namespaces::enter_namespaces_from(root_makes_namespaces, policy.best_effort, policy.network, in_shared)?
        }
        _ => Vec::new(),
    };
    let workspace_quota = match &policy.workspace_quota {
        // A template fits only a policy with a workspace quota.
        Some(quota) if template.is_some() => {
            let template = template.expect("checked by the guard");
            if as_root {
                template.copy_root()?;
            }
            let (uids, gids) =
                sys::ids().map_err(|source| errors::NamespaceError::Unshare { what: "ids".into(), source })?;
            mounts::mount_workspace_in_template(quota, identity.unwrap_or(Identity { uid: uids[1], gid: gids[1] }))?;
            Some(quota.bytes)
        }
        Some(quota) if root_makes_namespaces || namespaces.contains(&"user") => {
            match mounts::enter_mount_namespace() {
                Ok(()) => {
                    let (uids, gids) =
                        sys::ids().map_err(|source| errors::NamespaceError::Unshare { what: "ids".into(), source })?;
                    let owner = identity.unwrap_or(Identity { uid: uids[1], gid: gids[1] });
                    // Once in the namespace, every failure is an error, best effort or not.
                    mounts::prepare_filesystem(policy, quota, owner)?;
                    Some(quota.bytes)
                }
                // Refused before anything changed (a container's seccomp profile): no quota
                // and no private root, and `Applied` says so.
                Err(_) if policy.best_effort => None,
                Err(e) => return Err(e.into()),
            }
        }
        // No mount namespace can be made (neither root nor a user namespace): best effort
        // runs without the quota, and `Applied::workspace_quota` says so.
        Some(_) if policy.best_effort => None,
        Some(_) => {
            return Err(errors::NamespaceError::Unshare {
                what: "mount (workspace quota)".into(),
                source: std::io::Error::from_raw_os_error(libc::EPERM),
            }
            .into())
        }
        None => None,
    };
    process::close_kept_fds(&kept)?;
    // In the new network namespace, before the drop (bringing `lo` up needs
    // CAP_NET_ADMIN there); refused without a network namespace, best effort or not.
    let proxy_port = match (policy.network, policy.violation_fd) {
        (true, Some(report_socket)) => Some(network::open_proxy_listener(&namespaces, report_socket)?),
        _ => None,
    };
    if let Some(nice) = policy.nice.filter(|_| !early_identity) {
        // Before the drop: only root's capabilities allow a negative value.
        sys::set_nice(nice).map_err(|source| errors::PrivilegeError::Priority { nice, source })?;
    }
    // Already the sandbox's uid (and, in its user namespace, no longer allowed
    // `setgroups`): only the capabilities, the bounding set and no_new_privs are left.
    // As root without an early switch no user namespace was entered above, so a bounding
    // set the zygote emptied (`privileges::empty_bounding_set`) is still empty here.
    privileges::drop_privileges(if early_identity { None } else { identity }, root_makes_namespaces)?;
    // A learning sandbox stays dumpable: an unprivileged supervisor reads the paths of
    // its file calls from its memory (see `observe`). Started as root it is not: the
    // identity switch cleared the flag, and root's supervisor needs none.
    if !policy.learning {
        process::make_non_dumpable()?;
    }
    // The template's paths name what a copy of its root holds: only for a child that made one.
    let opened_paths = if template.is_some() { opened_paths } else { &[] };
    let landlock = ruleset::restrict_filesystem_and_network(policy, proxy_port, opened_paths)?;
    process::close_kept_fds(&kept_through_landlock)?;
    rlimits::apply_limits(&policy.limits, address_space_now)?;
    let private_root = workspace_quota.is_some() && policy.private_root;
    let seccomp = if policy.best_effort && !sys::seccomp_available() {
        false
    } else if filters.profile().private_root && !private_root {
        // Built for a private root that best effort went without: the host's files are
        // here, so by-path metadata calls and record locks must be refused after all.
        let profile = SeccompProfile { private_root: false, ..filters.profile() };
        SeccompFilters::build(profile)?.install(policy.violation_fd)?;
        true
    } else {
        filters.install(policy.violation_fd)?;
        true
    };
    Ok(Applied {
        namespaces: namespaces.into_iter().map(String::from).collect(),
        workspace_quota,
        private_root,
        identity,
        landlock,
        seccomp,
        nice: policy.nice,
        programs: policy.executable.len(),
        learning: policy.learning,
        proxy_port,
    })
}

fn capget_error(source: std::io::Error) -> LockdownError {
    errors::PrivilegeError::Capabilities { call: "capget", source }.into()
}
