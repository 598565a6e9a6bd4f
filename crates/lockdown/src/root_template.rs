//! Step 2b made once (issue #26): a private root built in a mount namespace of its own,
//! which each child copies instead of building its own.
//!
//! Building a private root costs a child about half of its lockdown: a copy of the host's
//! mount table, a tmpfs, an overlay per read-only tree, copies of small files, bind
//! mounts of the devices, `pivot_root` and the detach of the old root, whose teardown
//! waits for an RCU grace period (milliseconds on a busy machine). A [`RootTemplate`] is
//! that root built once, by a helper process, in a mount namespace the zygote keeps open.
//! A child then joins it (`setns`) and makes a private copy (`unshare(CLONE_NEWNS)`
//! copies only the template's dozen mounts), and mounts its own workspace in the copy:
//! two tmpfs mounts instead of everything above.
//!
//! What a child sees is the same root: the same trees as the same read-only overlays,
//! the same copies, the same devices, its workspace on a tmpfs of its quota. Two things
//! differ, both bounded by [`MAX_AGE`]: the overlays and copies are shared by the
//! children of one template, so a host change to a read-only tree may show only in a
//! template built after it (overlayfs keeps what it looked up, missing entries
//! included), as it already did for a pre-forked child that waited; and the children
//! share the overlays' superblocks, as they share the host's through the overlays.
//!
//! Without root, joining a mount namespace needs `CAP_SYS_ADMIN` over the user namespace
//! that owns it: the helper makes a user namespace first (mapping our uid to itself) and
//! builds the root in it, and a child joins that user namespace (its owner's uid has
//! every capability there), then the template's mount namespace, and then makes its own
//! user namespace inside the template's, with its private copy of the root: each
//! sandbox keeps a user namespace of its own, and the copied mounts are locked in it (a
//! copy into a less privileged user namespace cannot be unmounted to uncover anything).

use crate::errors::NamespaceError;
use crate::mounts;
use crate::policy::{Policy, VisibleOnly, WorkspaceQuota};
use crate::ruleset::OpenedPath;
use crate::sys;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long a template serves new children before it is built again, so that a host
/// change to a read-only tree (a package installed) reaches new sandboxes within this
/// time. A build costs about as much as one child's own root.
pub const MAX_AGE: Duration = Duration::from_secs(10);

/// Everything of a policy that shapes its private root, but the workspace itself: the
/// policies of one shape share a template.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RootShape {
    read_only: Vec<PathBuf>,
    executable: Vec<PathBuf>,
    read_write: Vec<PathBuf>,
    visible_only: Vec<VisibleOnly>,
    workspace_parent: PathBuf,
}

impl RootShape {
    /// The whole shape in words: what a pinned template's stamp holds.
    fn text(&self) -> String {
        format!("{self:?}")
    }

    /// The shape of `policy`'s private root; `None` when it has none a template can give
    /// (no private root, no workspace quota, no namespaces, or best effort, which may go
    /// without the mount namespace).
    pub fn of(policy: &Policy) -> Option<RootShape> {
        let quota = policy.workspace_quota.as_ref()?;
        if !policy.private_root || !policy.namespaces || policy.best_effort {
            return None;
        }
        Some(RootShape {
            read_only: policy.read_only.clone(),
            executable: policy.executable.clone(),
            read_write: policy.read_write.iter().filter(|p| **p != quota.path).cloned().collect(),
            visible_only: policy.visible_only.clone(),
            workspace_parent: quota.path.parent()?.to_path_buf(),
        })
    }
}

/// A private root built once, in a mount namespace held open by `namespace`.
#[derive(Debug)]
pub struct RootTemplate {
    namespace: OwnedFd,
    /// The user namespace that owns `namespace`, when built without root.
    user_namespace: Option<OwnedFd>,
    shape: RootShape,
    built: Instant,
    /// The Landlock rules' paths opened in the template's root, but those a child mounts
    /// over (its workspace and everything beneath the workspace's parent).
    opened_paths: Vec<OpenedPath>,
}

impl RootTemplate {
    /// Build `policy`'s private root in a new mount namespace (without root: in a new user
    /// namespace too), in a helper process forked for it (the caller's own namespaces
    /// never change). The caller must be single-threaded (it forks and the helper runs on).
    pub fn build(policy: &Policy) -> Result<RootTemplate, NamespaceError> {
        let shape = RootShape::of(policy).ok_or_else(|| build_failed(io::Error::other("no private root to share")))?;
        let quota = policy.workspace_quota.as_ref().expect("RootShape::of checked the quota");
        let (report_read, report_write) = pipe()?;
        let (hold_read, hold_write) = pipe()?;
        // SAFETY: the caller is single-threaded (the zygote), so the helper is a complete
        // copy; it only builds the root, reports and `_exit`s.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(build_failed(io::Error::last_os_error()));
        }
        if pid == 0 {
            drop((report_read, hold_write));
            let outcome = build_in_helper(policy, &shape, quota);
            let message = match &outcome {
                Ok(()) => BUILT.to_string(),
                Err(e) => crate::command::error_chain(e),
            };
            // A report that cannot be written reads as a failure to the parent (it
            // takes only BUILT as success), so there is nothing else to do with it here.
            let reported = std::fs::File::from(report_write).write_all(message.as_bytes());
            // Hold the namespace until the parent has opened it (it closes `hold`); any
            // answer, end of file or error, means the parent is done with us.
            let _ = std::fs::File::from(hold_read).read(&mut [0u8; 1]);
            let code = if outcome.is_ok() && reported.is_ok() { 0 } else { 1 };
            // SAFETY: `_exit` skips the atexit handlers of the caller's copy (R's).
            unsafe { libc::_exit(code) }
        }
        drop((report_write, hold_read));
        // A root that cannot be built in time (a hung mount) must not stop the zygote,
        // which serves every sandbox: the helper is killed, and children build their own.
        if !readable_within(&report_read, BUILD_TIMEOUT) {
            // SAFETY: signalling and reaping our own helper, not yet reaped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            return Err(build_failed(io::Error::new(io::ErrorKind::TimedOut, "the helper took too long")));
        }
        let mut message = String::new();
        let read = std::fs::File::from(report_read).read_to_string(&mut message);
        let as_root = sys::effective_uid() == 0;
        let opened = std::fs::File::open(format!("/proc/{pid}/ns/mnt"));
        let opened_user = (!as_root).then(|| std::fs::File::open(format!("/proc/{pid}/ns/user")));
        let opened_paths = if message == BUILT { open_rule_paths(pid, &shape) } else { Vec::new() };
        drop(hold_write);
        let mut status = 0;
        // SAFETY: reaping our own helper, which exits once `hold` is closed.
        let reaped = unsafe { libc::waitpid(pid, &mut status, 0) };
        read.map_err(build_failed)?;
        // Fail closed: only the helper's own word that the root is complete, and its clean
        // exit, make a template (a helper that died half-way said nothing).
        if message != BUILT {
            let why = if message.is_empty() { "the helper ended without a report".into() } else { message };
            return Err(build_failed(io::Error::other(why)));
        }
        if reaped != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            return Err(build_failed(io::Error::other(format!("the helper ended with status {status:#x}"))));
        }
        Ok(RootTemplate {
            namespace: opened.map_err(build_failed)?.into(),
            user_namespace: opened_user.transpose().map_err(build_failed)?.map(OwnedFd::from),
            shape,
            built: Instant::now(),
            opened_paths,
        })
    }

    /// The Landlock rules' paths opened in this root (see [`OpenedPath`]); like
    /// [`Self::fds`], kept open by a child until its Landlock step, then closed.
    pub fn opened_paths(&self) -> &[OpenedPath] {
        &self.opened_paths
    }

    /// Whether `policy`'s private root is this template's.
    pub fn fits(&self, policy: &Policy) -> bool {
        RootShape::of(policy).as_ref() == Some(&self.shape)
    }

    /// The fds a child joins; they must survive the lockdown's closing of inherited fds
    /// until then (see [`crate::apply_with_root`]).
    pub fn fds(&self) -> Vec<RawFd> {
        std::iter::once(&self.namespace).chain(&self.user_namespace).map(AsRawFd::as_raw_fd).collect()
    }

    /// When it was built (it serves new children until [`MAX_AGE`] after).
    pub fn built_at(&self) -> Instant {
        self.built
    }

    /// Whether it was built without root (a child without root uses only such a one).
    pub fn without_root(&self) -> bool {
        self.user_namespace.is_some()
    }

    /// In the child, as root: join the template's mount namespace and make a private
    /// copy of it ([`mounts::mount_workspace_in_template`] then mounts the workspace there).
    pub(crate) fn copy_root(&self) -> Result<(), NamespaceError> {
        join(&self.namespace, libc::CLONE_NEWNS, "mount (join the root template)")?;
        mounts::enter_mount_namespace()
    }

    /// In the child, without root: join the template's user and mount namespaces, make a
    /// user namespace of our own inside them with a private copy of the root, and the
    /// network, IPC and UTS namespaces. Returns the namespaces made, as
    /// [`crate::namespaces::enter_namespaces`] does.
    pub(crate) fn enter_without_root(&self) -> Result<crate::namespaces::Created, NamespaceError> {
        let Some(user) = &self.user_namespace else {
            return Err(build_failed(io::Error::other("a template built as root serves only root")));
        };
        // The id maps of our own user namespace are written through /proc, which the
        // template's root does not hold: this process's directory, opened first.
        let proc_dir = rustix::fs::open(
            format!("/proc/{}", std::process::id()),
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            0.into(),
        )
        .map_err(|e| NamespaceError::Unshare { what: "user (open /proc/self)".into(), source: e.into() })?;
        join(user, libc::CLONE_NEWUSER, "user (join the root template's)")?;
        join(&self.namespace, libc::CLONE_NEWNS, "mount (join the root template)")?;
        crate::namespaces::enter_user_namespace_with(libc::CLONE_NEWNS, Some(proc_dir.as_fd()))?;
        drop(proc_dir);
        crate::namespaces::enter_other_namespaces()
    }
}

/// Pinned templates, for one-process-per-call callers as root (`rsandbox exec`), which
/// have no zygote to keep a [`RootTemplate`] open: the template's mount namespace is
/// pinned by a bind mount of its `nsfs` file at `DIR/root-<hash of the shape>`, beside a
/// stamp file `DIR/root-<hash>.shape` holding the whole shape (so a hash collision is
/// never a wrong root) whose age is the template's. Every later call of the same shape
/// within [`MAX_AGE`] joins that root (as the zygote's children join theirs) instead of
/// building its own; an older one is built again. At most [`MAX_PINNED`] are kept:
/// expired ones are unmounted and removed whenever one is pinned.
impl RootTemplate {
    /// The template of `policy`'s private root pinned in `dir` (which the caller made
    /// root-owned and 0700: whoever may write there chooses the roots sandboxes join),
    /// built and pinned first when it is missing or expired; concurrent callers
    /// serialise on `dir/root.lock`. Root only. Forks a helper to build: call it from a
    /// single-threaded process.
    pub fn open_or_pin(dir: &std::path::Path, policy: &Policy) -> io::Result<RootTemplate> {
        let shape = RootShape::of(policy).ok_or_else(|| io::Error::other("no private root to share"))?;
        if sys::effective_uid() != 0 {
            return Err(io::Error::other("only root pins root templates"));
        }
        let pin = PinPaths::of(dir, &shape);
        if let Ok(template) = pin.open(&shape) {
            return Ok(template);
        }
        let lock = crate::namespaces::open_or_create(&dir.join("root.lock"))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)?;
        // Another caller may have pinned it while this one waited.
        if let Ok(template) = pin.open(&shape) {
            return Ok(template);
        }
        let template = RootTemplate::build(policy).map_err(io::Error::other)?;
        // Too many pinned (of shapes still in use): this call uses its template unpinned.
        if remove_expired_pins(dir)? >= MAX_PINNED {
            return Ok(template);
        }
        // The stamp goes first and comes back last: a reader never takes a new pin for
        // an old stamp's age, nor an old pin for a new stamp (either would be a template
        // of this shape anyway).
        match std::fs::remove_file(&pin.stamp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        detach_all(&pin.namespace)?;
        crate::namespaces::open_or_create(&pin.namespace)?;
        let source = std::ffi::CString::new(format!("/proc/self/fd/{}", template.namespace.as_raw_fd()))
            .map_err(io::Error::other)?;
        let target = std::ffi::CString::new(pin.namespace.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
        sys::bind_mount(&source, &target)?;
        let draft = pin.stamp.with_extension("shape.draft");
        std::fs::write(&draft, shape.text())?;
        std::fs::rename(&draft, &pin.stamp)?;
        Ok(template)
    }
}

/// At most this many pinned templates at once (each holds a mount namespace and its
/// overlays); beyond it a caller uses the template it built without pinning it.
const MAX_PINNED: usize = 32;

/// Where one shape's template is pinned.
struct PinPaths {
    namespace: std::path::PathBuf,
    stamp: std::path::PathBuf,
}

impl PinPaths {
    fn of(dir: &std::path::Path, shape: &RootShape) -> PinPaths {
        // FNV-1a: the same name for the same shape in every build of rsandbox (the
        // stamp's full text is what is trusted, not the hash).
        let hash =
            shape.text().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
        let name = format!("{PIN_PREFIX}{hash:016x}");
        PinPaths { namespace: dir.join(&name), stamp: dir.join(format!("{name}.shape")) }
    }

    /// The pinned template, when its stamp names this shape and is younger than [`MAX_AGE`].
    fn open(&self, shape: &RootShape) -> io::Result<RootTemplate> {
        let age = stamp_age(&self.stamp)?;
        if age >= MAX_AGE {
            return Err(io::Error::other("the pinned root template has expired"));
        }
        let mut text = String::new();
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&self.stamp)?
            .read_to_string(&mut text)?;
        if text != shape.text() {
            return Err(io::Error::other("the pinned root template is of another shape"));
        }
        let namespace = crate::namespaces::open_namespace(&self.namespace, libc::CLONE_NEWNS)?;
        Ok(RootTemplate {
            namespace,
            user_namespace: None,
            shape: shape.clone(),
            built: Instant::now().checked_sub(age).unwrap_or_else(Instant::now),
            // No helper to open them through: the child opens the rules' paths itself.
            opened_paths: Vec::new(),
        })
    }
}

/// Pins are named `root-<16 hex digits>`, stamps the same with `.shape`.
const PIN_PREFIX: &str = "root-";

fn stamp_age(stamp: &std::path::Path) -> io::Result<Duration> {
    let modified = std::fs::symlink_metadata(stamp)?.modified()?;
    // A stamp from the future (the clock set back) counts as expired.
    Ok(modified.elapsed().unwrap_or(Duration::MAX))
}

/// Detach every mount stacked on `path` (none when it is no mount point).
fn detach_all(path: &std::path::Path) -> io::Result<()> {
    let target = path.to_str().ok_or_else(|| io::Error::other("pin path is not UTF-8"))?;
    for _ in 0..MAX_PINNED {
        match sys::umount_detach(target) {
            Ok(()) => {}
            // Not a mount point (any more), or not there at all.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOENT)) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!("{} stays mounted", path.display())))
}

/// Unpin and remove the expired templates in `dir` (held under its lock); the number of
/// live ones left.
fn remove_expired_pins(dir: &std::path::Path) -> io::Result<usize> {
    let mut live = 0;
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(stamp) = name.to_str().filter(|n| n.starts_with(PIN_PREFIX) && n.ends_with(".shape")) else {
            continue;
        };
        let stamp = dir.join(stamp);
        if stamp_age(&stamp).is_ok_and(|age| age < MAX_AGE) {
            live += 1;
            continue;
        }
        let namespace = stamp.with_extension("");
        std::fs::remove_file(&stamp)?;
        detach_all(&namespace)?;
        match std::fs::remove_file(&namespace) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(live)
}

/// `setns(fd, kind)`.
fn join(fd: &OwnedFd, kind: libc::c_int, what: &str) -> Result<(), NamespaceError> {
    // SAFETY: integer-only system call on an fd we hold; it changes this process's
    // namespace (and for a mount namespace its root and working directory), which is
    // the point.
    if unsafe { libc::setns(fd.as_raw_fd(), kind) } != 0 {
        return Err(NamespaceError::Unshare { what: what.into(), source: io::Error::last_os_error() });
    }
    Ok(())
}

/// The zygote's templates, one per root shape, each built again after [`MAX_AGE`].
#[derive(Debug, Default)]
pub struct RootTemplates {
    built: Vec<RootTemplate>,
    /// Shapes whose build failed, and when: not tried again before [`MAX_AGE`] (each
    /// child then builds its own root, which reports the failure in its own terms).
    failed: Vec<(RootShape, Instant)>,
}

/// At most this many templates are kept (the least recently built dropped).
const MAX_TEMPLATES: usize = 8;

impl RootTemplates {
    /// The template for `policy`'s root, built now if there is none or it is older than
    /// [`MAX_AGE`]; `None` when the policy has no root a template can give, or when the
    /// build failed.
    pub fn for_policy(&mut self, policy: &Policy) -> Option<&RootTemplate> {
        let shape = RootShape::of(policy)?;
        self.built.retain(|t| t.built.elapsed() < MAX_AGE);
        self.failed.retain(|(_, at)| at.elapsed() < MAX_AGE);
        if self.failed.iter().any(|(s, _)| *s == shape) {
            return None;
        }
        if let Some(at) = self.built.iter().position(|t| t.shape == shape) {
            return self.built.get(at);
        }
        match RootTemplate::build(policy) {
            Ok(template) => {
                if self.built.len() >= MAX_TEMPLATES {
                    self.built.remove(0);
                }
                self.built.push(template);
                self.built.last()
            }
            Err(_) => {
                self.failed.push((shape, Instant::now()));
                None
            }
        }
    }
}

/// The rules' paths of `shape` opened in the root of the helper `pid` (the template's
/// root, through `/proc/PID/root`), but those beneath the workspace's parent, which each
/// child mounts over. A path that does not open is left to the child, which opens it
/// itself and fails or skips it as it always did: nothing is granted that the child
/// would not grant.
fn open_rule_paths(pid: libc::pid_t, shape: &RootShape) -> Vec<OpenedPath> {
    let Ok(root) = rustix::fs::open(
        format!("/proc/{pid}/root"),
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        0.into(),
    ) else {
        return Vec::new();
    };
    shape
        .read_only
        .iter()
        .chain(&shape.executable)
        .chain(&shape.read_write)
        .filter(|path| !path.starts_with(&shape.workspace_parent))
        .filter_map(|path| OpenedPath::open_in(root.as_fd(), path).ok())
        .collect()
}

fn build_in_helper(policy: &Policy, shape: &RootShape, quota: &WorkspaceQuota) -> Result<(), NamespaceError> {
    if sys::effective_uid() != 0 {
        crate::namespaces::enter_user_namespace()?;
    }
    mounts::enter_mount_namespace()?;
    sys::mount(None, "/", None, libc::MS_REC | libc::MS_PRIVATE, None)
        .map_err(|source| NamespaceError::Unshare { what: "mount (make / private)".into(), source })?;
    mounts::enter_template_root(policy, &quota.path, &shape.workspace_parent)
}

/// The helper's report when the root is complete; anything else is why it is not.
const BUILT: &str = "built";

/// How long the helper may take to build a root (~2 ms when nothing is wrong).
const BUILD_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `fd` has something to read (or its writer closed) within `timeout`.
fn readable_within(fd: &OwnedFd, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
        let wait = rustix::event::Timespec { tv_sec: left.as_secs() as i64, tv_nsec: left.subsec_nanos() as i64 };
        match rustix::event::poll(&mut fds, Some(&wait)) {
            Ok(n) => return n > 0,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
}

fn build_failed(source: io::Error) -> NamespaceError {
    NamespaceError::Unshare { what: "mount (build the root template)".into(), source }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), NamespaceError> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(build_failed(io::Error::last_os_error()));
    }
    // SAFETY: pipe2 just returned these two fds, owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wait on the helper ends at the timeout when it says nothing, and at once when
    /// it reports or closes its end.
    #[test]
    fn a_silent_helper_is_given_up_on_at_the_timeout() {
        let (read, write) = pipe().unwrap();
        let started = Instant::now();
        assert!(!readable_within(&read, Duration::from_millis(50)));
        assert!(started.elapsed() >= Duration::from_millis(50));
        std::fs::File::from(write.try_clone().unwrap()).write_all(b"x").unwrap();
        assert!(readable_within(&read, Duration::from_secs(5)));
        let (read, write) = pipe().unwrap();
        drop(write);
        assert!(readable_within(&read, Duration::from_secs(5)), "a closed writer is readable (end of file)");
    }
}
