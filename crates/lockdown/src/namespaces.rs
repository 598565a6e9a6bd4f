//! Step 2: namespaces. Network, IPC and UTS namespaces cut the sandbox off from host
//! sockets (including abstract unix sockets), SysV IPC and the host name. Without root a
//! user namespace comes first (it grants the right to create the others), mapping our own
//! uid and gid to themselves so nothing gains an identity.

use crate::errors::NamespaceError;
use crate::sys;
use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};

/// Namespaces created, by name.
pub type Created = Vec<&'static str>;

const OTHERS: [(libc::c_int, &str); 3] =
    [(libc::CLONE_NEWNET, "net"), (libc::CLONE_NEWIPC, "ipc"), (libc::CLONE_NEWUTS, "uts")];

/// The `unshare` flags of all of [`OTHERS`].
fn all_others() -> libc::c_int {
    OTHERS.iter().fold(0, |acc, (flag, _)| acc | flag)
}

/// Set in a process that [`share_empty_namespaces`] moved into empty network, IPC and
/// UTS namespaces of its own; its forks inherit the flag with the namespaces.
static IN_SHARED_EMPTY_NAMESPACES: AtomicBool = AtomicBool::new(false);

/// Move the calling process (the zygote, as root, once) into new network, IPC and UTS
/// namespaces that every child it forks afterwards inherits, so that [`enter_namespaces`]
/// need not make them per child: creating a network namespace costs ~0.5 ms of CPU (its
/// loopback device and sysctl tables) plus its teardown on the kernel's cleanup worker,
/// and an IPC namespace ~80 µs (its message-queue file system), the largest parts of a
/// child's lockdown after the mounts.
///
/// Sharing them loses nothing while seccomp is enforced: no sandbox can create a socket
/// with the network off, the sockets it has are socketpairs of the host's namespace, and
/// abstract unix sockets, the one thing a network namespace would still keep apart, are
/// scoped by Landlock to their sandbox; every System V IPC and POSIX message-queue call
/// is refused (`ENOSYS`), so the IPC namespace holds nothing a sandbox could share; and
/// the host name, copied into the UTS namespace when it is made, cannot be changed
/// (`sethostname` is a violation, and no sandbox holds a capability). Only root's
/// children use them: a child without root makes a user namespace first, and may not
/// join namespaces owned by another.
pub fn share_empty_namespaces() -> Result<(), NamespaceError> {
    if !IN_SHARED_EMPTY_NAMESPACES.load(Ordering::Relaxed) {
        sys::unshare(all_others())
            .map_err(|source| NamespaceError::Unshare { what: "net,ipc,uts (shared)".into(), source })?;
        IN_SHARED_EMPTY_NAMESPACES.store(true, Ordering::Relaxed);
    }
    Ok(())
}

/// Create the namespaces. With `best_effort` a kernel refusal yields fewer namespaces
/// instead of an error (and the shared ones are not used: best effort may go without
/// seccomp or Landlock's scoping, which sharing relies on). `network`: the policy gives
/// the network by proxy, which needs a network namespace of the sandbox's own. As root,
/// a child stays in the namespaces [`share_empty_namespaces`] made when its parent made
/// them; they are still reported as `net`, `ipc` and `uts`, namespaces apart from the
/// host's.
pub fn enter_namespaces(as_root: bool, best_effort: bool, network: bool) -> Result<Created, NamespaceError> {
    let mut created = Vec::new();
    if !as_root {
        match enter_user_namespace() {
            Ok(()) => created.push("user"),
            // Without a user namespace the others cannot be created either.
            Err(e) if tolerated(&e, best_effort) => return Ok(created),
            Err(e) => return Err(e),
        }
    }
    let shared = as_root && !best_effort && IN_SHARED_EMPTY_NAMESPACES.load(Ordering::Relaxed);
    let flags = OTHERS
        .iter()
        .filter(|(flag, _)| !shared || (network && *flag == libc::CLONE_NEWNET))
        .fold(0, |acc, (flag, _)| acc | flag);
    match if flags == 0 { Ok(()) } else { sys::unshare(flags) } {
        Ok(()) => created.extend(OTHERS.iter().map(|(_, name)| *name)),
        // Best effort: nothing was created, and the caller learns it from `Applied::namespaces`,
        // which lists only what this function returns.
        Err(_) if best_effort => {}
        Err(source) => return Err(NamespaceError::Unshare { what: "net,ipc,uts".into(), source }),
    }
    Ok(created)
}

/// Which failures best effort may pass over: only a namespace the kernel refused to
/// create. Once `unshare(CLONE_NEWUSER)` has succeeded there is no way back, and a user
/// namespace without id maps leaves the process as the overflow id with nothing
/// reported: that is always an error.
fn tolerated(error: &NamespaceError, best_effort: bool) -> bool {
    best_effort && matches!(error, NamespaceError::Unshare { .. })
}

pub(crate) fn enter_user_namespace() -> Result<(), NamespaceError> {
    enter_user_namespace_with(0, None)
}

/// `unshare(CLONE_NEWUSER | also)`, then map our own uid and gid to themselves. The maps
/// are written through `proc_dir` (this process's `/proc/<pid>`, opened earlier) when
/// given: a process that has joined a root template sees no `/proc`.
pub(crate) fn enter_user_namespace_with(
    also: libc::c_int,
    proc_dir: Option<std::os::fd::BorrowedFd<'_>>,
) -> Result<(), NamespaceError> {
    let (uids, gids) = sys::ids().map_err(|source| NamespaceError::Unshare { what: "user".into(), source })?;
    sys::unshare(libc::CLONE_NEWUSER | also)
        .map_err(|source| NamespaceError::Unshare { what: "user".into(), source })?;
    let write = |file: &'static str, text: String| {
        let written = match proc_dir {
            Some(dir) => rustix::fs::openat(
                dir,
                file.trim_start_matches("/proc/self/"),
                rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
                0.into(),
            )
            .map_err(std::io::Error::from)
            .and_then(|fd| std::io::Write::write_all(&mut fs::File::from(fd), text.as_bytes())),
            None => fs::write(file, text),
        };
        written.map_err(|source| NamespaceError::IdMap { file, source })
    };
    // setgroups must be denied before an unprivileged process may write gid_map.
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{0} {0} 1\n", uids[1]))?;
    write("/proc/self/gid_map", format!("{0} {0} 1\n", gids[1]))
}

/// The network, IPC and UTS namespaces, for a process already in a user namespace of
/// its own (one that joined a root template without root).
pub(crate) fn enter_other_namespaces() -> Result<Created, NamespaceError> {
    sys::unshare(all_others()).map_err(|source| NamespaceError::Unshare { what: "net,ipc,uts".into(), source })?;
    Ok(std::iter::once("user").chain(OTHERS.iter().map(|(_, name)| *name)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn best_effort_passes_over_a_refused_namespace_but_never_a_missing_id_map() {
        let refused =
            || NamespaceError::Unshare { what: "user".into(), source: io::Error::from_raw_os_error(libc::EPERM) };
        let unmapped =
            || NamespaceError::IdMap { file: "/proc/self/uid_map", source: io::Error::from_raw_os_error(libc::EPERM) };
        assert!(tolerated(&refused(), true));
        assert!(!tolerated(&refused(), false));
        assert!(!tolerated(&unmapped(), true), "entered but unmapped is an error even with best effort");
        assert!(!tolerated(&unmapped(), false));
    }
}
