//! Step 2: namespaces. Network, IPC and UTS namespaces cut the sandbox off from host
//! sockets (including abstract unix sockets), SysV IPC and the host name. Without root a
//! user namespace comes first (it grants the right to create the others), mapping our own
//! uid and gid to themselves so nothing gains an identity.

use crate::errors::NamespaceError;
use crate::sys;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
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

/// Empty network, IPC and UTS namespaces pinned by bind mounts of their `nsfs` files in a
/// directory, for one-process-per-call callers as root (`rsandbox exec`), which have no
/// zygote to keep [`share_empty_namespaces`]' alive: the first call makes them, every
/// later one opens them and its child joins them ([`PinnedNamespaces::join`]) instead of
/// making its own (~0.5 ms of CPU for a network namespace, and its teardown on the
/// kernel's cleanup worker, which the next call's fork then competes with). Sharing
/// them loses nothing, for the reasons [`share_empty_namespaces`] gives. They last until
/// the mounts are removed (`umount DIR/net DIR/ipc DIR/uts`) or the machine restarts.
#[derive(Debug)]
pub struct PinnedNamespaces {
    /// The namespaces' fds, each with its `setns` type.
    namespaces: Vec<(libc::c_int, OwnedFd)>,
}

/// `statfs` type of the namespace file system (`NSFS_MAGIC`).
const NSFS_MAGIC: i64 = 0x6e73_6673;
/// `ioctl(fd, NS_GET_NSTYPE)`: the `CLONE_NEW*` type of a namespace fd.
const NS_GET_NSTYPE: libc::c_ulong = 0xb703;

impl PinnedNamespaces {
    /// Open the namespaces pinned in `dir` (which the caller made root-owned and 0700:
    /// whoever may write there chooses the namespaces), pinning new empty ones first
    /// when they are missing; concurrent callers serialise on `dir/lock`. Forks a helper:
    /// call it from a single-threaded process.
    pub fn open_or_pin(dir: &Path) -> io::Result<PinnedNamespaces> {
        if let Ok(pinned) = Self::open(dir) {
            return Ok(pinned);
        }
        let lock = open_or_create(&dir.join("lock"))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)?;
        // Another caller may have pinned them while this one waited.
        if let Ok(pinned) = Self::open(dir) {
            return Ok(pinned);
        }
        pin_new_empty_namespaces(dir)?;
        Self::open(dir)
    }

    /// The namespaces pinned in `dir`; an error when one is missing or is not a
    /// namespace of its name's type.
    fn open(dir: &Path) -> io::Result<PinnedNamespaces> {
        let namespaces = OTHERS
            .iter()
            .map(|(kind, name)| open_namespace(&dir.join(name), *kind).map(|fd| (*kind, fd)))
            .collect::<io::Result<_>>()?;
        Ok(PinnedNamespaces { namespaces })
    }

    /// The fds it holds.
    pub(crate) fn fds(&self) -> impl Iterator<Item = std::os::fd::RawFd> + '_ {
        self.namespaces.iter().map(|(_, fd)| fd.as_raw_fd())
    }

    /// Move the calling process (a child about to lock itself down) into these
    /// namespaces; its lockdown, told so, then makes no others, as in a zygote's child.
    /// No flag of this process records it: `command::spawn`'s child runs in its
    /// parent's memory, which stays in the host's namespaces.
    pub fn join(&self) -> Result<(), NamespaceError> {
        for (kind, fd) in &self.namespaces {
            // SAFETY: an integer-only system call on an fd we hold; changing this
            // process's namespaces is the point.
            if unsafe { libc::setns(fd.as_raw_fd(), *kind) } != 0 {
                return Err(NamespaceError::Unshare {
                    what: "net,ipc,uts (join the pinned ones)".into(),
                    source: io::Error::last_os_error(),
                });
            }
        }
        Ok(())
    }
}

/// Open `path` and check that it is a namespace of type `kind` (so a plain file, or a
/// namespace of another type bound there, is never joined).
pub(crate) fn open_namespace(path: &Path, kind: libc::c_int) -> io::Result<OwnedFd> {
    let file = fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path)?;
    let fs_type = rustix::fs::fstatfs(&file)?.f_type as i64;
    // SAFETY: NS_GET_NSTYPE takes no argument and returns an integer.
    let file_kind = unsafe { libc::ioctl(file.as_raw_fd(), NS_GET_NSTYPE as _) };
    if fs_type != NSFS_MAGIC || file_kind != kind {
        return Err(io::Error::other(format!("{} is not a pinned namespace", path.display())));
    }
    Ok(file.into())
}

/// `path`, made empty (mode 0600) if missing; never through a symlink.
pub(crate) fn open_or_create(path: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Fork a helper that makes new network, IPC and UTS namespaces and binds each of its
/// `/proc/self/ns` files onto `dir/net`, `dir/ipc`, `dir/uts` (made empty first).
fn pin_new_empty_namespaces(dir: &Path) -> io::Result<()> {
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other);
    let mut binds = Vec::new();
    for (_, name) in OTHERS {
        let target = dir.join(name);
        open_or_create(&target)?;
        binds.push((c(&Path::new("/proc/self/ns").join(name))?, c(&target)?));
    }
    // SAFETY: the caller is single-threaded; the child makes only system calls on
    // memory prepared before the fork, and ends with _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: namespace flags only; then bind mounts of C strings made above.
        let status = unsafe {
            if libc::unshare(all_others()) != 0 {
                1
            } else if binds.iter().any(|(source, target)| {
                libc::mount(source.as_ptr(), target.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) != 0
            }) {
                2
            } else {
                0
            }
        };
        sys::exit_immediately(status);
    }
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut status = 0;
    // SAFETY: reaping our own child.
    if unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
        return Err(io::Error::last_os_error());
    }
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(()),
        (_, step) => Err(io::Error::other(format!(
            "the helper pinning namespaces in {} failed ({})",
            dir.display(),
            if step == 1 { "unshare" } else { "bind mount" }
        ))),
    }
}

/// Create the namespaces. With `best_effort` a kernel refusal yields fewer namespaces
/// instead of an error (and the shared ones are not used: best effort may go without
/// seccomp or Landlock's scoping, which sharing relies on). `network`: the policy gives
/// the network by proxy, which needs a network namespace of the sandbox's own. As root,
/// a child stays in the namespaces [`share_empty_namespaces`] made when its parent made
/// them; they are still reported as `net`, `ipc` and `uts`, namespaces apart from the
/// host's.
pub fn enter_namespaces(as_root: bool, best_effort: bool, network: bool) -> Result<Created, NamespaceError> {
    enter_namespaces_from(as_root, best_effort, network, in_shared_empty_namespaces())
}

/// Whether [`share_empty_namespaces`] moved this process (or the parent it was forked
/// from) into empty namespaces of its own.
pub(crate) fn in_shared_empty_namespaces() -> bool {
    IN_SHARED_EMPTY_NAMESPACES.load(Ordering::Relaxed)
}

/// [`enter_namespaces`] from namespaces the caller says it is in: `in_shared`, shared
/// empty network, IPC and UTS namespaces (made by [`share_empty_namespaces`] or joined by
/// [`PinnedNamespaces::join`]).
pub(crate) fn enter_namespaces_from(
    as_root: bool,
    best_effort: bool,
    network: bool,
    in_shared: bool,
) -> Result<Created, NamespaceError> {
    let mut created = Vec::new();
    if !as_root {
        match enter_user_namespace() {
            Ok(()) => created.push("user"),
            // Without a user namespace the others cannot be created either.
            Err(e) if tolerated(&e, best_effort) => return Ok(created),
            Err(e) => return Err(e),
        }
    }
    let shared = as_root && !best_effort && in_shared;
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
