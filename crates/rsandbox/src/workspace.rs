//! Private workspaces and the identities that own them.
//!
//! Each sandbox gets a fresh directory, mode 0700. When the supervisor runs as root,
//! each live sandbox also gets its own uid/gid from a range nothing else uses, so
//! `RLIMIT_NPROC` counts that sandbox's processes only and sandboxes cannot signal or
//! read one another even without Landlock. A uid is held with an exclusive `flock` on
//! `/run/rsandbox-uids/<uid>` for the sandbox's life (the file is removed with it), so
//! separate engines (every CLI call is one) never share one. Directories are removed
//! when the guard drops.
//!
//! An engine killed without its clean-up (SIGKILL, a crash) cannot remove its root; the
//! next engine to start under the same parent does ([`WorkspaceRoot::sweep_abandoned`]):
//! each root is held with an exclusive `flock` for its engine's life, so a root whose lock
//! is free has no engine, in this pid namespace or any other sharing the directory.

use crate::errors::{EngineError, InputError};
use lockdown::Identity;
use rustix::fs::FlockOperation;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Number of uids in the range; at most this many sandboxes can be alive at once as root.
const UID_RANGE: u32 = 65_536;

/// The directory all of one engine's workspaces live under, removed with the engine.
#[derive(Debug)]
pub struct WorkspaceRoot {
    dir: RootDir,
    /// Where the workspaces with a disk quota go instead, when they are only mount points
    /// (see [`WorkspaceRoot::with_mount_points_in_memory`]); removed with the engine.
    mount_points: Option<RootDir>,
    as_root: bool,
    uid_base: u32,
    /// Every sandbox's identity, when the administrator named one.
    fixed_identity: Option<Identity>,
    next: Mutex<u64>,
    budget: Arc<DiskBudget>,
}

/// One of an engine's root directories, and the lock that says the engine is alive.
#[derive(Debug)]
struct RootDir {
    path: PathBuf,
    /// A directory other processes use at the same time (see
    /// [`WorkspaceRoot::in_shared_dir`]): kept when the engine ends.
    shared: bool,
    /// The directory itself, open and `flock`ed until the engine drops it (after the
    /// directory is removed: fields drop after `WorkspaceRoot`'s own `Drop`).
    _alive: fs::File,
}

/// Names of engine roots: `rsandbox-<pid>-<16 hex digits>`. The pid is only for people
/// reading `/tmp` (and for roots of versions that held no lock, below).
const ROOT_PREFIX: &str = "rsandbox-";
/// A root is made under this name, locked, then renamed to its own: a sweep never sees
/// a root that is not locked yet.
const NEW_ROOT_PREFIX: &str = ".rsandbox-new-";

/// The server-wide cap on workspace quotas: a tmpfs workspace is host memory once
/// filled, so the quotas of all live sandboxes (pre-forked ones included) together may
/// not exceed it. A workspace holds its quota's share until it is removed.
#[derive(Debug)]
struct DiskBudget {
    cap: u64,
    reserved: Mutex<u64>,
}

/// One sandbox's workspace; removed (with everything in it) on drop.
#[derive(Debug)]
pub struct Workspace {
    path: PathBuf,
    identity: Option<Identity>,
    /// This workspace's share of the budget, returned on drop.
    _reservation: Reservation,
    /// Holds the uid's lock; dropping it (after the directory is gone) frees the uid.
    _uid_lock: Option<UidLease>,
}

/// A sandbox uid held: `/run/rsandbox-uids/<uid>`, open and `flock`ed. Dropping it
/// removes the file, then closes it (so the directory holds only the uids in use, not
/// one file for every uid ever given out, up to 65 536 tmpfs inodes); whoever locks a
/// file checks that it is still the one at that path (see `allocate_identity`).
#[derive(Debug)]
struct UidLease {
    path: PathBuf,
    _file: fs::File,
}

impl Drop for UidLease {
    fn drop(&mut self) {
        // While locked, no other caller can make a new file at this path (they open
        // this one, and fail to lock it): the path names this lease's file.
        fs::remove_file(&self.path).ok();
    }
}

impl WorkspaceRoot {
    /// Create a fresh root under `parent` (default: the system temp dir); the quotas of
    /// its live workspaces together stay under `disk_cap` bytes.
    pub fn create(parent: Option<&Path>, uid_base: u32, disk_cap: u64) -> Result<WorkspaceRoot, EngineError> {
        let parent = parent.map(Path::to_path_buf).unwrap_or_else(std::env::temp_dir);
        WorkspaceRoot::in_dir(|| make_root_dir(&parent), uid_base, disk_cap)
    }

    /// A root in the directory `make_dir` gives, once root is known to be able to give
    /// each sandbox a user of its own.
    fn in_dir(
        make_dir: impl FnOnce() -> Result<RootDir, EngineError>,
        uid_base: u32,
        disk_cap: u64,
    ) -> Result<WorkspaceRoot, EngineError> {
        let as_root = rustix::process::geteuid().is_root();
        if as_root {
            refuse_root_that_cannot_switch_users()?;
        }
        Ok(WorkspaceRoot {
            dir: make_dir()?,
            mount_points: None,
            as_root,
            uid_base,
            fixed_identity: None,
            next: Mutex::new(0),
            budget: Arc::new(DiskBudget { cap: disk_cap, reserved: Mutex::new(0) }),
        })
    }

    /// Put the workspaces that have a disk quota under a directory of their own in
    /// [`memory_parent`] (when there is one): the engine's config promises that such a
    /// workspace is the sandbox's own quota tmpfs, mounted in its mount namespace
    /// ([`mount_points_may_live_in_memory`]), so its host directory is only a mount point
    /// that nothing is ever written to, and making and removing it on a tmpfs costs a
    /// tenth of what it did on the ext4 of `/tmp` (issue #26: ~0.07 ms of the
    /// supervisor's 0.6 ms of CPU per fresh evaluation, and the journal's work besides).
    /// Workspaces without a quota stay under the root's own directory, on disk.
    pub fn with_mount_points_in_memory(mut self, config: &crate::EngineConfig) -> Result<WorkspaceRoot, EngineError> {
        if config.workspace_root.is_none() && mount_points_may_live_in_memory(config) {
            if let Some(parent) = memory_parent() {
                self.mount_points = Some(make_root_dir(&parent)?);
            }
        }
        Ok(self)
    }

    /// A root whose workspaces all go in `dir`, a root-owned directory that other
    /// processes share at the same time (made 0700 if missing), with no directory of its
    /// own: `rsandbox exec` as root, whose pinned root template holds the workspaces'
    /// parent directory, so that every call's workspace must lie in the same one. Each
    /// name holds this process's pid, so no two live processes pick the same; `dir`
    /// outlives the root, which removes only the workspaces it made. Like
    /// [`Self::with_mount_points_in_memory`], only for a workspace with a quota, the
    /// sandbox's own tmpfs: nothing is ever written to these directories. (It replaces
    /// an engine root made beside it and never used: ~15 system calls of every `exec`,
    /// issue #26.)
    pub fn in_shared_dir(dir: PathBuf, uid_base: u32, disk_cap: u64) -> Result<WorkspaceRoot, EngineError> {
        WorkspaceRoot::in_dir(|| shared_root_dir(dir), uid_base, disk_cap)
    }

    /// Run every sandbox as `identity` (when root) instead of a fresh uid each.
    pub fn with_fixed_identity(mut self, identity: Option<Identity>) -> WorkspaceRoot {
        self.fixed_identity = identity;
        self
    }

    /// The root directory.
    pub fn path(&self) -> &Path {
        &self.dir.path
    }

    /// Remove the roots, beside this one's, that no engine holds any more: left by
    /// engines that were killed (SIGKILL, a crash) with their workspaces and mount points.
    /// Only directories named as roots, owned by this user, not symlinks, whose lock is
    /// free and whose pid (for roots of earlier versions, which held no lock) is not a
    /// live process here. Best effort: a root that cannot be removed is left, and said.
    pub fn sweep_abandoned(&self) {
        for parent in std::iter::once(&self.dir).chain(&self.mount_points).filter_map(|d| d.path.parent()) {
            sweep_abandoned_roots(parent);
        }
    }

    /// A new workspace for a sandbox with a disk quota of `quota` bytes (0: none), owned
    /// by a fresh identity when running as root. Refused when the live workspaces'
    /// quotas would exceed the engine's cap.
    pub fn workspace(&self, quota: u64) -> Result<Workspace, EngineError> {
        {
            let mut reserved = self.budget.reserved.lock().expect("disk budget");
            if quota > self.budget.cap {
                // Never satisfiable, however many sandboxes end: the caller's mistake.
                return Err(EngineError::Input(InputError::BadLimit {
                    what: "disk".into(),
                    value: format!(
                        "{} MiB is more than this server's {} MiB for all workspaces together",
                        quota >> 20,
                        self.budget.cap >> 20
                    ),
                }));
            }
            if *reserved + quota > self.budget.cap {
                return Err(EngineError::Capacity(format!(
                    "the workspaces of the live sandboxes already reserve {} MiB of the server's {} MiB for workspaces \
                     (this sandbox asks {} MiB); close sessions or ask for a smaller disk quota",
                    *reserved >> 20,
                    self.budget.cap >> 20,
                    quota >> 20
                )));
            }
            *reserved += quota;
        }
        let reservation = Reservation { budget: self.budget.clone(), quota };
        let n = {
            let mut next = self.next.lock().expect("workspace counter");
            *next += 1;
            *next
        };
        let parent = self.mount_points.as_ref().filter(|_| quota > 0).unwrap_or(&self.dir);
        let path = if parent.shared {
            parent.path.join(format!("ws-{}-{n}", std::process::id()))
        } else {
            parent.path.join(format!("ws-{n}"))
        };
        let created = fs::DirBuilder::new().mode(0o700).create(&path).or_else(|e| {
            // In a shared directory, a name of this pid left by an earlier process of the
            // same pid (killed before it removed its workspace): no live one can hold it.
            if parent.shared && e.kind() == io::ErrorKind::AlreadyExists {
                remove_tree(&path);
                fs::DirBuilder::new().mode(0o700).create(&path)
            } else {
                Err(e)
            }
        });
        created.map_err(EngineError::io(format!("create {}", path.display())))?;
        let (identity, uid_lock) = match (self.as_root, self.fixed_identity) {
            (true, Some(id)) => (Some(id), None),
            (true, None) => {
                let (id, lock) = self.allocate_identity()?;
                (Some(id), Some(lock))
            }
            (false, _) => (None, None),
        };
        let workspace = Workspace { path, identity, _reservation: reservation, _uid_lock: uid_lock };
        if let Some(id) = identity {
            std::os::unix::fs::chown(&workspace.path, Some(id.uid), Some(id.gid))
                .map_err(EngineError::io(format!("chown {}", workspace.path.display())))?;
        }
        Ok(workspace)
    }

    /// A uid no other live sandbox on this host holds, and its lock.
    fn allocate_identity(&self) -> Result<(Identity, UidLease), EngineError> {
        let dir = uid_lock_dir()?;
        let mut random = [0u8; 4];
        getrandom(&mut random).map_err(EngineError::io("read random bytes"))?;
        let start = u32::from_ne_bytes(random);
        for i in 0..UID_RANGE {
            let uid = self.uid_base + start.wrapping_add(i) % UID_RANGE;
            let path = dir.join(uid.to_string());
            let file = fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
                .map_err(EngineError::io(format!("open {}", path.display())))?;
            // Non-blocking: a uid another sandbox holds is skipped, not waited for.
            if rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
                continue;
            }
            // Its holder may have removed the file between our open and our lock (its
            // lease ended): a lock on a file no longer at the path holds nothing, and a
            // new file there may already be someone else's.
            let held = fs::symlink_metadata(&path).is_ok_and(|at_path| {
                file.metadata().is_ok_and(|ours| (ours.dev(), ours.ino()) == (at_path.dev(), at_path.ino()))
            });
            if held {
                return Ok((Identity { uid, gid: uid }, UidLease { path, _file: file }));
            }
        }
        Err(EngineError::Io { what: "allocate a sandbox uid".into(), source: io::Error::other("all uids in use") })
    }
}

/// Root that may not switch users (no `CAP_SETUID`, `CAP_SETGID` or `CAP_CHOWN`: a
/// container started with `--cap-drop ALL`) cannot give each sandbox a uid of its own,
/// and its sandboxes would run as uid 0, whose process count the kernel does not limit:
/// refused, saying what to change, before anything is created.
fn refuse_root_that_cannot_switch_users() -> Result<(), EngineError> {
    let missing = lockdown::privileges::missing_root_capabilities().map_err(EngineError::io("read capabilities"))?;
    if missing.is_empty() {
        return Ok(());
    }
    Err(EngineError::Setup(format!(
        "running as root without {} (a container started with --cap-drop ALL?), rsandbox cannot give each sandbox \
         a user of its own, and sandboxes running as root would have no process limit: run it as an ordinary user \
         (docker run --user 1000, as the Containerfile does; Kubernetes runAsNonRoot), or keep those capabilities \
         (--cap-add SETUID --cap-add SETGID --cap-add CHOWN)",
        missing.join(", ")
    )))
}

impl Drop for WorkspaceRoot {
    fn drop(&mut self) {
        // A shared directory outlives every root that uses it.
        for dir in std::iter::once(&self.dir).chain(&self.mount_points).filter(|d| !d.shared) {
            remove_tree(&dir.path);
        }
    }
}

/// `dir` as a directory that other processes share ([`WorkspaceRoot::in_shared_dir`]):
/// made root-only if missing (refused if it is not), and cleared of the workspaces of
/// processes that are gone.
fn shared_root_dir(dir: PathBuf) -> Result<RootDir, EngineError> {
    let file = open_root_only_dir(&dir)?;
    sweep_workspaces_of_dead_processes(&dir);
    Ok(RootDir { path: dir, shared: true, _alive: file })
}

/// Remove the workspaces in a shared directory ([`WorkspaceRoot::in_shared_dir`])
/// whose process is gone (killed before it removed its own): each is named
/// `ws-<pid>-<n>`, and only the process of that pid uses it. A pid that a new process
/// has taken keeps its leftovers until that one ends. Best effort, like
/// [`WorkspaceRoot::sweep_abandoned`]: these are mount points, never written to.
fn sweep_workspaces_of_dead_processes(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name.to_str().and_then(|n| n.strip_prefix("ws-")).and_then(|n| n.split_once('-'));
        let Some(pid) = pid.and_then(|(pid, _)| pid.parse::<i32>().ok()).and_then(rustix::process::Pid::from_raw)
        else {
            continue;
        };
        // ESRCH only: a process we may not signal (EPERM) is alive.
        if rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH) {
            remove_tree(&entry.path());
        }
    }
}

/// A fresh directory under `parent`, mode 0711 (sandbox uids may traverse to their own
/// workspace but not list the others), locked for as long as the engine lives.
fn make_root_dir(parent: &Path) -> Result<RootDir, EngineError> {
    let mut random = [0u8; 8];
    getrandom(&mut random).map_err(EngineError::io("read random bytes"))?;
    let name = format!("{}-{:016x}", std::process::id(), u64::from_ne_bytes(random));
    let new = parent.join(format!("{NEW_ROOT_PREFIX}{name}"));
    fs::DirBuilder::new().mode(0o711).create(&new).map_err(EngineError::io(format!("create {}", new.display())))?;
    let locked = open_dir(&new).and_then(|dir| {
        fs::set_permissions(&new, fs::Permissions::from_mode(0o711))?;
        rustix::fs::flock(&dir, FlockOperation::LockExclusive)?;
        Ok(dir)
    });
    let path = parent.join(format!("{ROOT_PREFIX}{name}"));
    let renamed = locked.and_then(|dir| fs::rename(&new, &path).map(|()| dir));
    match renamed {
        Ok(dir) => Ok(RootDir { path, shared: false, _alive: dir }),
        Err(e) => {
            fs::remove_dir(&new).ok();
            Err(EngineError::io(format!("create {}", path.display()))(e))
        }
    }
}

fn open_dir(path: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path)
}

/// [`WorkspaceRoot::sweep_abandoned`] for one parent directory.
fn sweep_abandoned_roots(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else { return };
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(root_pid) else { continue };
        let path = entry.path();
        let ours = fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == me);
        if !ours || Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        // Held while it is removed, so that no two engines sweep one root at once.
        let Ok(dir) = open_dir(&path) else { continue };
        if rustix::fs::flock(&dir, FlockOperation::NonBlockingLockExclusive).is_ok() {
            remove_tree(&path);
        }
    }
}

/// The pid in a root's name (`rsandbox-<pid>-<16 hex digits>`), or `None` for any other name.
fn root_pid(name: &str) -> Option<u32> {
    let (pid, random) = name.strip_prefix(ROOT_PREFIX)?.split_once('-')?;
    let hex = random.len() == 16 && random.bytes().all(|b| b.is_ascii_hexdigit());
    pid.parse().ok().filter(|_| hex)
}

/// Whether a workspace with a disk quota is sure to be the sandbox's own quota tmpfs, so
/// that its host directory is only a mount point: namespaces on and no best effort (which
/// could run without a mount namespace, and then in the host directory itself), and no
/// `TMPDIR` naming where temporary files belong.
pub fn mount_points_may_live_in_memory(config: &crate::EngineConfig) -> bool {
    config.namespaces && !config.best_effort && std::env::var_os("TMPDIR").is_none()
}

/// `/dev/shm` when it is a root-owned, sticky tmpfs: where directories that are only
/// mount points are made and removed cheaply (~30 µs, where a busy ext4 `/tmp` took
/// milliseconds).
pub fn memory_parent() -> Option<PathBuf> {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const SHM: &std::ffi::CStr = c"/dev/shm";
    let meta = fs::symlink_metadata("/dev/shm").ok()?;
    if !meta.is_dir() || meta.uid() != 0 || meta.mode() & 0o1777 != 0o1777 {
        return None;
    }
    if rustix::fs::statfs(SHM).ok()?.f_type as i64 != TMPFS_MAGIC {
        return None;
    }
    Some(PathBuf::from("/dev/shm"))
}

impl Workspace {
    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The identity the sandbox runs as (when the supervisor is root).
    pub fn identity(&self) -> Option<Identity> {
        self.identity
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        remove_tree(&self.path);
    }
}

/// A share of the disk budget, returned when dropped (after the directory is gone: a
/// struct's fields drop after its own `Drop`).
#[derive(Debug)]
struct Reservation {
    budget: Arc<DiskBudget>,
    quota: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut reserved = self.budget.reserved.lock().expect("disk budget");
        *reserved = reserved.saturating_sub(self.quota);
    }
}

/// Half the machine's memory: the default cap on all workspace quotas together.
pub fn default_disk_cap() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let (pages, size) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    (pages.max(0) as u64).saturating_mul(size.max(0) as u64) / 2
}

/// The directory of uid locks: root-owned, 0700, not a symlink (fail closed otherwise:
/// whoever controls it could make two sandboxes share a uid).
fn uid_lock_dir() -> Result<PathBuf, EngineError> {
    root_only_dir("rsandbox-uids")
}

/// Where `rsandbox exec` as root pins the empty namespaces its programs share
/// ([`lockdown::namespaces::PinnedNamespaces`]): root-owned and 0700 for the same reason
/// (whoever may write there chooses the namespaces sandboxes join).
pub(crate) fn pinned_namespaces_dir() -> Result<PathBuf, EngineError> {
    root_only_dir("rsandbox-ns")
}

/// `/run/NAME` (the temporary directory's without `/run`), made root-owned and 0700 if
/// missing, refused if it is anything else.
fn root_only_dir(name: &str) -> Result<PathBuf, EngineError> {
    let base = if Path::new("/run").is_dir() { PathBuf::from("/run") } else { std::env::temp_dir() };
    let dir = base.join(name);
    open_root_only_dir(&dir)?;
    Ok(dir)
}

/// `dir`, made root-owned and 0700 if missing, and opened; refused if it is anything
/// else (not a directory, a symlink, another owner's, open to others). The checks are
/// of the opened directory, so the name cannot be swapped between them and its use.
fn open_root_only_dir(dir: &Path) -> Result<fs::File, EngineError> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(EngineError::io(format!("create {}", dir.display()))(e)),
    }
    let refused = || io::Error::other("must be a root-owned directory with mode 0700");
    let opened = open_dir(dir)
        .map_err(|e| match e.raw_os_error() {
            // A symlink (O_NOFOLLOW) or not a directory (O_DIRECTORY).
            Some(libc::ELOOP | libc::ENOTDIR) => refused(),
            _ => e,
        })
        .and_then(|file| {
            let meta = file.metadata()?;
            if meta.uid() != 0 || meta.mode() & 0o077 != 0 {
                return Err(refused());
            }
            Ok(file)
        });
    opened.map_err(EngineError::io(format!("use {}", dir.display())))
}

/// Remove a tree the sandbox may have made awkward (a directory chmod'ed to 000).
fn remove_tree(path: &Path) {
    if fs::remove_dir_all(path).is_ok() || !path.exists() {
        return;
    }
    restore_permissions(path);
    if let Err(e) = fs::remove_dir_all(path) {
        crate::note!("rsandbox: failed to remove {}: {e}", path.display());
    }
}

fn restore_permissions(path: &Path) {
    let Ok(meta) = fs::symlink_metadata(path) else { return };
    if meta.is_dir() {
        if fs::set_permissions(path, fs::Permissions::from_mode(0o700)).is_err() {
            return;
        }
        if let Ok(entries) = fs::read_dir(path) {
            for entry in entries.flatten() {
                restore_permissions(&entry.path());
            }
        }
    }
}

fn getrandom(buf: &mut [u8]) -> io::Result<()> {
    // SAFETY: writing at most buf.len() bytes into buf.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n as usize == buf.len() {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_only_directory_is_made_private_and_anything_else_refused() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: only root owns a root-only directory");
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let fresh = base.path().join("fresh");
        open_root_only_dir(&fresh).unwrap();
        assert_eq!(fs::symlink_metadata(&fresh).unwrap().mode() & 0o7777, 0o700);
        let open_to_others = base.path().join("open");
        fs::create_dir(&open_to_others).unwrap();
        fs::set_permissions(&open_to_others, fs::Permissions::from_mode(0o755)).unwrap();
        let link = base.path().join("link");
        std::os::unix::fs::symlink(&fresh, &link).unwrap();
        let file = base.path().join("file");
        fs::write(&file, "").unwrap();
        for refused in [&open_to_others, &link, &file] {
            let e = open_root_only_dir(refused).unwrap_err();
            let reason = std::error::Error::source(&e).map(ToString::to_string).unwrap_or_default();
            assert_eq!(reason, "must be a root-owned directory with mode 0700", "{}", refused.display());
            assert_eq!(e.to_string(), format!("failed to use {}", refused.display()));
        }
    }

    #[test]
    fn workspaces_are_private_and_removed() {
        let root = WorkspaceRoot::create(None, 2_000_000_000, u64::MAX).unwrap();
        let ws = root.workspace(0).unwrap();
        let path = ws.path().to_path_buf();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o700);
        fs::create_dir(path.join("locked")).unwrap();
        fs::write(path.join("locked/f"), "x").unwrap();
        fs::set_permissions(path.join("locked"), fs::Permissions::from_mode(0o000)).unwrap();
        drop(ws);
        assert!(!path.exists());
        let root_path = root.path().to_path_buf();
        drop(root);
        assert!(!root_path.exists());
    }

    /// A root in a shared directory (one `rsandbox exec` as root) makes nothing there
    /// but its workspaces, named for its process, and removes only those: the directory
    /// and another process's workspace stay.
    #[test]
    fn a_root_in_a_shared_directory_makes_and_removes_only_its_workspaces() {
        if rustix::process::geteuid().as_raw() != 0 {
            eprintln!("skipped: only root owns a root-only directory");
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let shared = base.path().join("shared");
        let live = shared.join("ws-1-1"); // pid 1 (init) is alive: kept by the sweep
        fs::create_dir_all(&live).unwrap();
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o700)).unwrap();
        let root = WorkspaceRoot::in_shared_dir(shared.clone(), 2_000_000_000, u64::MAX).unwrap();
        let ws = root.workspace(64 << 20).unwrap();
        assert_eq!(ws.path(), shared.join(format!("ws-{}-1", std::process::id())));
        let listing = |dir: &Path| {
            let mut names: Vec<_> = fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name()).collect();
            names.sort();
            names
        };
        assert_eq!(listing(base.path()), ["shared"], "no directory of the root's own");
        drop(ws);
        drop(root);
        assert_eq!(listing(&shared), ["ws-1-1"], "its workspace is gone, the other stays");
    }

    /// As root each workspace holds a uid of its own, by a locked file that is removed
    /// when the workspace goes (not left behind for every uid ever given out).
    #[test]
    fn a_uid_is_held_while_its_workspace_lives_and_its_file_goes_with_it() {
        if rustix::process::geteuid().as_raw() != 0 {
            return; // no uid per sandbox without root
        }
        let root = WorkspaceRoot::create(None, 2_000_000_000, u64::MAX).unwrap();
        let (a, b) = (root.workspace(0).unwrap(), root.workspace(0).unwrap());
        let (uid_a, uid_b) = (a.identity().unwrap().uid, b.identity().unwrap().uid);
        assert_ne!(uid_a, uid_b, "two live sandboxes never share a uid");
        let lock_of = |uid: u32| uid_lock_dir().unwrap().join(uid.to_string());
        assert!(lock_of(uid_a).exists() && lock_of(uid_b).exists());
        drop(a);
        assert!(!lock_of(uid_a).exists(), "the freed uid's file is removed");
        assert!(lock_of(uid_b).exists(), "the other is still held");
    }

    #[test]
    fn roots_no_engine_holds_are_swept_and_nothing_else() {
        let parent = tempfile::tempdir().unwrap();
        let root = WorkspaceRoot::create(Some(parent.path()), 2_000_000_000, u64::MAX).unwrap();
        // A root this process still holds (its own pid is alive, and it is locked).
        let other = WorkspaceRoot::create(Some(parent.path()), 2_000_000_000, u64::MAX).unwrap();
        // No pid is this large (pid_max is at most 2^22): an engine that is gone.
        let dead = |hex: &str| parent.path().join(format!("rsandbox-999999999-{hex}"));
        let abandoned = dead("00000000000000aa");
        fs::create_dir_all(abandoned.join("ws-1/locked")).unwrap();
        fs::write(abandoned.join("ws-1/locked/f"), "x").unwrap();
        fs::set_permissions(abandoned.join("ws-1/locked"), fs::Permissions::from_mode(0o000)).unwrap();
        // Locked by someone (another pid namespace's engine, say): kept.
        let held = dead("00000000000000bb");
        fs::create_dir(&held).unwrap();
        let holder = open_dir(&held).unwrap();
        rustix::fs::flock(&holder, FlockOperation::LockExclusive).unwrap();
        // A symlink named like a root is not followed, nor removed; other names are kept.
        let target = tempfile::tempdir().unwrap();
        fs::write(target.path().join("keep"), "x").unwrap();
        let link = dead("00000000000000cc");
        std::os::unix::fs::symlink(target.path(), &link).unwrap();
        let unrelated = parent.path().join("rsandbox-notes");
        fs::create_dir(&unrelated).unwrap();

        root.sweep_abandoned();
        assert!(!abandoned.exists());
        for kept in [root.path(), other.path(), &held, &link, &unrelated, &target.path().join("keep")] {
            assert!(kept.exists(), "{} was swept", kept.display());
        }
        // Once its engine lets go, a root goes with the next sweep.
        drop(holder);
        root.sweep_abandoned();
        assert!(!held.exists());
    }

    #[test]
    fn quotas_together_stay_under_the_cap_and_come_back_on_drop() {
        let root = WorkspaceRoot::create(None, 2_000_000_000, 300 << 20).unwrap();
        let a = root.workspace(128 << 20).unwrap();
        let b = root.workspace(128 << 20).unwrap();
        let refused = root.workspace(128 << 20).unwrap_err().to_string();
        assert!(refused.contains("256 MiB of the server's 300 MiB"), "{refused}");
        drop(a);
        let c = root.workspace(128 << 20).unwrap();
        drop((b, c));
        assert!(root.workspace(300 << 20).is_ok());
    }
}
