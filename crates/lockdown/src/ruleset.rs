//! Step 4: Landlock. Filesystem access beneath the policy's paths only, no TCP bind or
//! connect (with the network by proxy: connect to the proxy's port only), and no
//! signals or abstract unix sockets across the sandbox boundary.
//!
//! The ABI is pinned ([`REQUIRED_ABI`]), not taken from the running kernel, so the same
//! policy means the same thing everywhere; a kernel that cannot enforce all of it is
//! refused unless the policy asks for best effort.

use crate::errors::LandlockError;
use crate::policy::Policy;
use crate::sys;
use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The ABI whose every feature the sandbox relies on: V6 adds signal and abstract
/// unix socket scoping (Linux 6.12); V5 device ioctls; V4 TCP.
pub const REQUIRED_ABI: ABI = ABI::V6;
/// [`REQUIRED_ABI`] as a number, for messages.
pub const REQUIRED_ABI_NUMBER: i32 = 6;

/// What Landlock enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum LandlockEnforcement {
    /// Everything the policy asked.
    Full,
    /// Some of it (best effort on an older kernel).
    Partial,
    /// Nothing (best effort on a kernel without Landlock).
    None,
}

fn read_only_access() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir
}

fn read_write_access() -> BitFlags<AccessFs> {
    // Everything but executing files and creating device nodes.
    AccessFs::from_all(REQUIRED_ABI)
        & !(AccessFs::Execute | AccessFs::MakeChar | AccessFs::MakeBlock | AccessFs::IoctlDev)
}

fn rule(path: &Path, access: BitFlags<AccessFs>) -> Result<PathBeneath<PathFd>, LandlockError> {
    let fd = PathFd::new(path).map_err(|source| LandlockError::Path { path: path.to_path_buf(), source })?;
    // Directory-only rights on a file are invalid; keep the ones that apply to files.
    let access = if path.is_dir() { access } else { access & AccessFs::from_file(REQUIRED_ABI) };
    Ok(PathBeneath::new(fd, access))
}

/// Build and enforce the ruleset on the calling thread (and its future children).
/// `proxy_port`: the one TCP port a network-by-proxy sandbox may connect to.
pub fn restrict_filesystem_and_network(
    policy: &Policy,
    proxy_port: Option<u16>,
) -> Result<LandlockEnforcement, LandlockError> {
    let level = if policy.best_effort { CompatLevel::BestEffort } else { CompatLevel::HardRequirement };
    // Say plainly that the kernel lacks Landlock, rather than which access rights the
    // ruleset could not handle.
    let kernel_abi = sys::landlock_abi_version();
    if kernel_abi < REQUIRED_ABI_NUMBER && !policy.best_effort {
        return Err(LandlockError::NotEnforced { kernel_abi: kernel_abi.max(0), required_abi: REQUIRED_ABI_NUMBER });
    }
    let mut ruleset = Ruleset::default()
        .set_compatibility(level)
        .handle_access(AccessFs::from_all(REQUIRED_ABI))?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)?;
    // TCP is always handled: no bind anywhere, and a connect only to the proxy's port
    // (a port, not an address: in the sandbox's own network namespace only its
    // loopback exists, and nothing but the proxy's listener listens there).
    ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    let mut created = ruleset.create()?;
    if let Some(port) = proxy_port {
        created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
    }
    // Missing read-only paths grant nothing, so skipping them loses no protection.
    for path in policy.read_only.iter().filter(|p| p.exists()) {
        created = created.add_rule(rule(path, read_only_access())?)?;
    }
    for path in &policy.read_write {
        created = created.add_rule(rule(path, read_write_access())?)?;
    }
    for path in &policy.executable {
        created = created.add_rule(rule(path, AccessFs::Execute | AccessFs::ReadFile)?)?;
    }
    let status = created.restrict_self()?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(LandlockEnforcement::Full),
        RulesetStatus::PartiallyEnforced if policy.best_effort => Ok(LandlockEnforcement::Partial),
        RulesetStatus::NotEnforced if policy.best_effort => Ok(LandlockEnforcement::None),
        _ => Err(LandlockError::NotEnforced {
            kernel_abi: sys::landlock_abi_version(),
            required_abi: REQUIRED_ABI_NUMBER,
        }),
    }
}
