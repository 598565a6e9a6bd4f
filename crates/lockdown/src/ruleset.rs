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
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

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

/// A rule's path opened once, ahead of the children that use it: by the zygote in a root
/// template's root (see [`crate::root_template`]), so that a child copying that root adds
/// its rule for the path without an `open` and an `fstat` of its own (a fifth of its
/// Landlock step). A rule names an inode, and the child's copy of the root mounts the
/// same file systems as the template, so the fd grants in the copy what a path opened
/// there would.
#[derive(Debug)]
pub struct OpenedPath {
    path: PathBuf,
    fd: OwnedFd,
    is_dir: bool,
}

impl OpenedPath {
    /// `path` opened (`O_PATH`) beneath `root`, resolved as if `root` were `/`
    /// (`RESOLVE_IN_ROOT`: a symlink cannot lead out of it).
    pub fn open_in(root: BorrowedFd<'_>, path: &Path) -> std::io::Result<OpenedPath> {
        use rustix::fs::{OFlags, ResolveFlags};
        let fd = rustix::fs::openat2(
            root,
            path,
            OFlags::PATH | OFlags::CLOEXEC,
            0.into(),
            ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
        )?;
        let is_dir = rustix::fs::FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode).is_dir();
        Ok(OpenedPath { path: path.to_path_buf(), fd, is_dir })
    }

    /// Its fd, which a child keeps open through the lockdown's closing of inherited fds
    /// until its Landlock step, and closes then.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Directory-only rights on a file are invalid; keep the ones that apply to files.
fn access_for(access: BitFlags<AccessFs>, is_dir: bool) -> BitFlags<AccessFs> {
    if is_dir {
        access
    } else {
        access & AccessFs::from_file(REQUIRED_ABI)
    }
}

/// `path` opened for a rule, and whether it is a directory; `None` for a path that
/// cannot be opened when `may_be_missing` (a missing read-only path grants nothing, so
/// skipping it loses no protection). One `open` and one `fstat` per path: the lockdown
/// of every child runs this for each path of its policy that it has not been given
/// opened ([`OpenedPath`]).
///
/// Opened `O_PATH` by rustix's own system call, not by `landlock::PathFd`: that goes
/// through `std::fs::OpenOptions`, which on musl (the `rsandbox` command's build) masks
/// `O_PATH` away with `O_ACCMODE` (musl counts `O_SEARCH`, its `O_PATH`, in it), so every
/// rule's path was opened for reading: a device's driver opened and released in each
/// lockdown (a tenth of `rsandbox exec`'s own CPU went to these opens and closes), a
/// directory without read permission refused, and a FIFO blocking until a writer came.
fn open_for_rule(path: &Path, may_be_missing: bool) -> Result<Option<(OwnedFd, bool)>, LandlockError> {
    use rustix::fs::{Mode, OFlags};
    let fd = match rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
        Ok(fd) => fd,
        // As `Path::exists` answered before: a path we cannot open is one we cannot see.
        Err(_) if may_be_missing => return Ok(None),
        Err(source) => return Err(LandlockError::Path { path: path.to_path_buf(), source: source.into() }),
    };
    let is_dir = rustix::fs::fstat(&fd)
        .map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir())
        .map_err(|e| LandlockError::Stat { path: path.to_path_buf(), source: e.into() })?;
    Ok(Some((fd, is_dir)))
}

/// `proxy_port`: the one TCP port a network-by-proxy sandbox may connect to. `opened`:
/// paths of the policy already opened in the root this process sees (empty when none).
pub fn restrict_filesystem_and_network(
    policy: &Policy,
    proxy_port: Option<u16>,
    opened: &[OpenedPath],
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
    // With every right of the pinned ABI enforced, a path's rule goes straight to the
    // kernel: the crate would `fstat` the fd again (one more call per rule, ~20 in each
    // child's lockdown) to learn whether it is a directory, which is known here, and
    // would change nothing else. Under best effort on an older kernel the crate adapts
    // the rights to what the kernel handles.
    let direct = if kernel_abi >= REQUIRED_ABI_NUMBER {
        Option::<OwnedFd>::from(created.try_clone().map_err(LandlockError::RulesetFd)?)
    } else {
        None
    };
    let rules = (policy.read_only.iter().map(|p| (p, read_only_access(), true)))
        .chain(policy.read_write.iter().map(|p| (p, read_write_access(), false)))
        .chain(policy.executable.iter().map(|p| (p, AccessFs::Execute | AccessFs::ReadFile, false)));
    for (path, access, may_be_missing) in rules {
        let opened_here;
        let (fd, is_dir) = match opened.iter().find(|known| known.path == *path) {
            Some(known) => (known.fd.as_fd(), known.is_dir),
            None => match open_for_rule(path, may_be_missing)? {
                Some((fd, is_dir)) => {
                    opened_here = fd;
                    (opened_here.as_fd(), is_dir)
                }
                None => continue,
            },
        };
        let access = access_for(access, is_dir);
        match &direct {
            Some(ruleset) => sys::landlock_add_path_rule(ruleset.as_fd(), fd, access.bits())
                .map_err(|source| LandlockError::AddRule { path: path.clone(), source })?,
            None => created = created.add_rule(PathBeneath::new(fd, access))?,
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A rule's path is only named, never opened for reading: a FIFO in a policy would
    /// otherwise hold the lockdown until some writer came (as it did in the musl build).
    #[test]
    fn a_rule_path_is_opened_as_a_path_only_so_a_fifo_does_not_block_the_lockdown() {
        let fifo = std::env::temp_dir().join(format!("rsandbox-rule-fifo-{}", std::process::id()));
        let _ = std::fs::remove_file(&fifo);
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, rustix::fs::Mode::RUSR, 0)
            .expect("mkfifo");
        let (sender, receiver) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = sender.send(open_for_rule(&path, false));
        });
        let opened = receiver.recv_timeout(Duration::from_secs(10));
        let _ = std::fs::remove_file(&fifo);
        let (fd, is_dir) = opened.expect("opening a FIFO for its rule blocked").expect("opened").expect("present");
        assert!(!is_dir);
        let flags = rustix::fs::fcntl_getfl(&fd).expect("F_GETFL");
        assert!(flags.contains(rustix::fs::OFlags::PATH), "not O_PATH: {flags:?}");
        assert!(rustix::io::fcntl_getfd(&fd).expect("F_GETFD").contains(rustix::io::FdFlags::CLOEXEC));
    }

    #[test]
    fn a_missing_rule_path_is_skipped_only_where_it_may_be_missing() {
        let missing = Path::new("/nonexistent/rsandbox-rule-path");
        assert!(open_for_rule(missing, true).expect("skipped").is_none());
        let error = open_for_rule(missing, false).expect_err("a required path must exist");
        assert!(error.to_string().contains("/nonexistent/rsandbox-rule-path"), "{error}");
    }
}
