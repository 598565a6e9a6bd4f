//! Step 2b: the sandbox's own filesystem, in a new mount namespace (the host never sees
//! it, and it vanishes with the sandbox).
//!
//! * The workspace is a private tmpfs of the quota's size, owned by the sandbox's
//!   identity, `nosuid,nodev`: the disk quota. RLIMIT_FSIZE still caps each file.
//! * With a private root, the process also `pivot_root`s into a small tmpfs that holds
//!   only what the policy names — the read-only trees bound read-only, the devices, the
//!   executables, the workspace — so host paths outside the policy do not exist at all,
//!   not even for `stat` (Landlock guards contents, not metadata).
//! * The read-only trees and files are read-only overlays of the host's, not bind mounts:
//!   an overlay has inodes of its own, so an `fcntl` record lock the sandbox takes on a
//!   file it may read (fontconfig's cache, R's library files) lands on the overlay's
//!   inode and never blocks a host program that wants a write lock (a bind mount shares
//!   the host's inode, and its lock table). That is what lets the seccomp program allow
//!   record locks with a private root (`SeccompProfile::private_root`); without one it
//!   refuses them.

use crate::errors::NamespaceError;
use crate::policy::{Identity, Policy, WorkspaceQuota};
use crate::sys;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

fn failed(what: impl Into<String>) -> impl FnOnce(io::Error) -> NamespaceError {
    let what = what.into();
    move |source| NamespaceError::Unshare { what, source }
}

fn c_path(path: &Path) -> Result<CString, NamespaceError> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| NamespaceError::Unshare { what: "mount".into(), source: io::Error::other("NUL in path") })
}

/// A mount namespace of our own. Its failure is the one a caller may pass over with
/// best effort: nothing has changed yet.
pub fn enter_mount_namespace() -> Result<(), NamespaceError> {
    sys::unshare(libc::CLONE_NEWNS).map_err(failed("mount"))
}

/// Build the sandbox's filesystem in the mount namespace [`enter_mount_namespace`] made:
/// a quota'd tmpfs workspace, and with `private_root` a root that holds nothing the
/// policy does not name. Ends in the workspace.
pub fn prepare_filesystem(policy: &Policy, quota: &WorkspaceQuota, owner: Identity) -> Result<(), NamespaceError> {
    // Nothing mounted here may propagate back to the host's mount table. EINVAL: `/` is
    // no mount point (a chroot), and nothing else here may be mounted either.
    sys::mount(None, "/", None, libc::MS_REC | libc::MS_PRIVATE, None).map_err(|e| match e.raw_os_error() {
        Some(libc::EINVAL) => NamespaceError::RootNotMountPoint,
        _ => failed("mount (make / private)")(e),
    })?;
    if policy.private_root {
        enter_private_root(policy, quota, owner)?;
    } else {
        mount_workspace(Path::new("/"), quota, owner)?;
    }
    std::env::set_current_dir(&quota.path).map_err(failed("chdir into the workspace"))
}

fn mount_workspace(root: &Path, quota: &WorkspaceQuota, owner: Identity) -> Result<(), NamespaceError> {
    let target = join(root, &quota.path);
    fs::create_dir_all(&target).map_err(failed(format!("mkdir {}", target.display())))?;
    let options =
        format!("size={},nr_inodes={},mode=0700,uid={},gid={}", quota.bytes, quota.inodes(), owner.uid, owner.gid);
    sys::mount_at(&c_path(&target)?, "tmpfs", libc::MS_NOSUID | libc::MS_NODEV, &options)
        .map_err(failed("tmpfs workspace"))
}

/// `root` + absolute `path`.
fn join(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

fn enter_private_root(policy: &Policy, quota: &WorkspaceQuota, owner: Identity) -> Result<(), NamespaceError> {
    // The new root is mounted over the workspace directory: it exists, and the host copy
    // of it stays empty anyway (the sandbox's files live on the quota tmpfs).
    build_private_root(policy, &quota.path, &quota.path, Some((quota, owner)))
}

/// Build the private root of [`crate::root_template::RootTemplate`]: everything
/// [`enter_private_root`] builds but the workspace, of which only the parent directory
/// exists (each child mounts its own there). Mounted over `mount_on`, a host directory
/// that exists; the calling process ends in the new root.
pub(crate) fn enter_template_root(policy: &Policy, workspace: &Path, mount_on: &Path) -> Result<(), NamespaceError> {
    build_private_root(policy, workspace, mount_on, None)
}

/// Mount the workspace of one child in its copy of a template's root: a small tmpfs of
/// its own over the workspace's parent (so that no other child's workspace name, nor
/// anything else, is shared), the quota's tmpfs in it, both read-only but the
/// workspace. Ends in the workspace.
pub(crate) fn mount_workspace_in_template(quota: &WorkspaceQuota, owner: Identity) -> Result<(), NamespaceError> {
    let Some(parent) = quota.path.parent() else {
        return Err(failed("workspace in the template root")(io::Error::other("the workspace has no parent")));
    };
    let parent_c = c_path(parent)?;
    sys::mount_at(&parent_c, "tmpfs", libc::MS_NOSUID | libc::MS_NODEV, "size=64k,nr_inodes=16,mode=0755")
        .map_err(failed(format!("tmpfs over {}", parent.display())))?;
    mount_workspace(Path::new("/"), quota, owner)?;
    sys::remount_bind(&parent_c, libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV)
        .map_err(failed(format!("remount {} read-only", parent.display())))?;
    std::env::set_current_dir(&quota.path).map_err(failed("chdir into the workspace"))
}

/// The private root, mounted over `mount_on`: with `quota`, the workspace mounted in it;
/// without, only its parent directory made (a template's root).
fn build_private_root(
    policy: &Policy,
    workspace: &Path,
    mount_on: &Path,
    quota: Option<(&WorkspaceQuota, Identity)>,
) -> Result<(), NamespaceError> {
    let new_root = mount_on.to_path_buf();
    // Room for the skeleton and the copies of small read-only files (`replicate`): a
    // tmpfs's size is a ceiling, not an allocation.
    let size = format!("size={}k,mode=0755", 1024 + MAX_FILES_COPIED * (MAX_COPIED_FILE >> 10));
    sys::mount_at(&c_path(&new_root)?, "tmpfs", libc::MS_NOSUID | libc::MS_NODEV, &size)
        .map_err(failed("tmpfs root"))?;
    // An empty lower layer: an overlay without an upper layer needs two lower ones.
    // It goes once every tree is in place.
    let empty = new_root.join(EMPTY_LAYER);
    fs::create_dir(&empty).map_err(failed(format!("mkdir {}", empty.display())))?;
    let mut entries: Vec<(&PathBuf, bool)> = Vec::new();
    entries.extend(policy.read_only.iter().map(|p| (p, true)));
    entries.extend(policy.executable.iter().map(|p| (p, true)));
    entries.extend(policy.read_write.iter().filter(|p| **p != workspace).map(|p| (p, false)));
    // Parents before children; a path inside one already bound comes with it, unless
    // it is writable inside a read-only one (then it is bound over it, read-write).
    entries.sort_by_key(|(p, _)| p.components().count());
    let mut bound: Vec<(&PathBuf, bool)> = Vec::new();
    let mut files = FileBatch::default();
    for (path, read_only) in entries {
        if bound.iter().any(|(b, b_read_only)| path.starts_with(b) && (read_only || !b_read_only)) {
            continue;
        }
        if !read_only {
            // A writable path bound over a read-only file must land on top of it, as it
            // did when files were bound one at a time.
            files.bind(&new_root)?;
        }
        if replicate(&new_root, path, read_only, &mut files)? {
            bound.push((path, read_only));
        }
    }
    files.bind(&new_root)?;
    for visible in &policy.visible_only {
        show_only(&new_root, visible, &mut files)?;
    }
    fs::remove_dir(&empty).map_err(failed(format!("rmdir {}", empty.display())))?;
    match quota {
        Some((quota, owner)) => mount_workspace(&new_root, quota, owner)?,
        None => {
            let parent = join(&new_root, workspace.parent().unwrap_or(workspace));
            fs::create_dir_all(&parent).map_err(failed(format!("mkdir {}", parent.display())))?;
        }
    }
    // Every root has a `/tmp`, read-only like the rest of the skeleton, also when the
    // workspace lies elsewhere (`/dev/shm`): code that writes there is refused (EROFS)
    // as it is everywhere outside its workspace, rather than told the directory is gone.
    let tmp = new_root.join("tmp");
    fs::create_dir_all(&tmp).map_err(failed(format!("mkdir {}", tmp.display())))?;
    let old = new_root.join(".old-root");
    fs::create_dir(&old).map_err(failed("mkdir .old-root"))?;
    sys::pivot_root(&c_path(&new_root)?, &c_path(&old)?).map_err(failed("pivot_root"))?;
    std::env::set_current_dir("/").map_err(failed("chdir /"))?;
    // The stages go with the old root, in its one detach: each is moved into the old
    // tree, onto the host directory the new root was mounted on (it exists, and nothing
    // reads it any more), rather than detached on its own.
    let in_old_root = c_path(&join(Path::new("/.old-root"), mount_on))?;
    for stage in files.stages {
        let at = Path::new("/").join(&stage);
        sys::move_mount(&c_path(&at)?, &in_old_root).map_err(failed(format!("move the stage {stage} away")))?;
        fs::remove_dir(&at).map_err(failed(format!("rmdir {stage}")))?;
    }
    sys::umount_detach("/.old-root").map_err(failed("umount the old root"))?;
    fs::remove_dir("/.old-root").map_err(failed("rmdir .old-root"))?;
    // The skeleton itself is read-only: only the workspace below it can be written.
    sys::mount(
        None,
        "/",
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
        None,
    )
    .map_err(failed("remount / read-only"))
}

/// Cover `visible.dir` (already bound under `root`) with an empty tmpfs and bind back
/// only the kept entries that exist: the others are absent from the sandbox's root.
fn show_only(root: &Path, visible: &crate::policy::VisibleOnly, files: &mut FileBatch) -> Result<(), NamespaceError> {
    let target = join(root, &visible.dir);
    if !target.is_dir() {
        return Ok(()); // not part of this root: nothing of it is visible anyway
    }
    sys::mount_at(&c_path(&target)?, "tmpfs", libc::MS_NOSUID | libc::MS_NODEV, "size=1m,mode=0755")
        .map_err(failed(format!("tmpfs over {}", visible.dir.display())))?;
    for entry in &visible.entries {
        replicate(root, &visible.dir.join(entry), true, files)?;
    }
    files.bind(root)?;
    // The cover itself read-only, like the rest of the skeleton.
    sys::remount_bind(&c_path(&target)?, libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV)
        .map_err(failed(format!("remount {} read-only", visible.dir.display())))
}

/// The empty directory under the new root that is every overlay's bottom layer.
const EMPTY_LAYER: &str = ".rsandbox-empty-layer";
/// Where a file's directory is overlaid before the file is bound into place (one stage
/// per directory, numbered: `.rsandbox-stage-0`, ...).
const STAGE: &str = ".rsandbox-stage";

/// A read-only file up to this size is copied into the private root rather than bound
/// from an overlay of its directory: a copy has an inode of its own as an overlay does,
/// costs a read of a few KiB (`/etc/ld.so.cache`, `/etc/timezone`) instead of an
/// overlay's set-up and detach (an RCU grace period), and works where the directory
/// cannot be overlaid: overlayfs refuses (EINVAL, "failed to clone lowerpath") a lower
/// directory with mounts under it that the sandbox's user namespace may not see under,
/// as `/etc` is in every container (`/etc/hosts`, `/etc/resolv.conf`, `/etc/hostname`
/// are bind mounts there).
const MAX_COPIED_FILE: u64 = 4 << 20;
/// How many files one root copies at most (bounds the root's tmpfs); more are bound
/// from an overlay of their directory.
const MAX_FILES_COPIED: u64 = 16;

/// `path` as one layer of overlayfs's `lowerdir=` (`\`, `:` and `,` escaped).
fn overlay_layer(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        if matches!(c, '\\' | ':' | ',') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Mount a read-only overlay of the host directory `source` at `target` (a new
/// superblock with inodes of its own), keeping the mount flags the kernel locked on the
/// source (noexec, nodev, nosuid in a user namespace).
fn overlay(root: &Path, source: &Path, target: &Path) -> Result<(), NamespaceError> {
    if source.to_str().is_none() {
        return Err(failed(format!("overlay {}", source.display()))(io::Error::other("path is not UTF-8")));
    }
    let locked = sys::mount_flags(&c_path(source)?).map_err(failed(format!("statvfs {}", source.display())))?;
    let options = format!("lowerdir={}:{}", overlay_layer(source), overlay_layer(&root.join(EMPTY_LAYER)));
    let flags = locked | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
    sys::mount(Some("overlay"), &target.to_string_lossy(), Some("overlay"), flags, Some(&options)).map_err(|e| {
        let what = if e.raw_os_error() == Some(libc::EINVAL) {
            // What overlayfs logs as "failed to clone lowerpath": the likely cause, in
            // the user's terms.
            format!(
                "overlay {} (overlayfs refuses a directory with mounts under it that the sandbox's user namespace \
                 may not look under, such as a container's bind mount: `docker run --init` binds docker-init under \
                 /usr/sbin; run the container without that mount, or rsandbox with --no-namespaces)",
                source.display()
            )
        } else {
            format!("overlay {}", source.display())
        };
        failed(what)(e)
    })
}

/// Read-only files too large to copy waiting to be bound, by host directory: each
/// directory is overlaid on a stage of its own once, and all its files are bound from
/// that one overlay. The stages stay mounted until the root is pivoted,
/// then go with the old root in its one detach: every detach waits for an RCU grace
/// period (~70 µs on an idle machine, milliseconds on a busy one), and there used to be
/// one per file.
#[derive(Default)]
struct FileBatch {
    by_directory: std::collections::BTreeMap<PathBuf, Vec<(std::ffi::OsString, PathBuf)>>,
    /// The stages used (names under the new root), each still holding its overlay.
    stages: Vec<String>,
    /// Small files copied into the root instead (at most `MAX_FILES_COPIED`).
    copies: u64,
}

impl FileBatch {
    /// Queue the host file `dir/name` to be bound, read-only, at `target`.
    fn push(&mut self, dir: &Path, name: &std::ffi::OsStr, target: PathBuf) {
        self.by_directory.entry(dir.to_path_buf()).or_default().push((name.to_os_string(), target));
    }

    /// Bind every queued file from a read-only overlay of its directory on the stage,
    /// and empty the queue.
    fn bind(&mut self, root: &Path) -> Result<(), NamespaceError> {
        for (dir, files) in std::mem::take(&mut self.by_directory) {
            let name = format!("{STAGE}-{}", self.stages.len());
            let stage = root.join(&name);
            fs::create_dir(&stage).map_err(failed(format!("mkdir {}", stage.display())))?;
            overlay(root, &dir, &stage)?;
            self.stages.push(name);
            for (name, target) in files {
                sys::bind_mount(&c_path(&stage.join(&name))?, &c_path(&target)?)
                    .map_err(failed(format!("bind {}", dir.join(&name).display())))?;
            }
        }
        Ok(())
    }
}

/// Recreate `path` under `root`: a symlink as the same symlink; a directory or file
/// read-only as a read-only overlay (a small file: a copy, up to `MAX_FILES_COPIED`; a
/// larger one: queued in `files`, to be bound from an overlay of its directory on the
/// stage), read-write as a bind mount. Returns false for a path that does not exist.
fn replicate(root: &Path, path: &Path, read_only: bool, files: &mut FileBatch) -> Result<bool, NamespaceError> {
    let Ok(meta) = fs::symlink_metadata(path) else { return Ok(false) };
    let target = join(root, path);
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).map_err(failed(format!("mkdir {}", parent.display())))?;
    }
    if meta.file_type().is_symlink() {
        let link = fs::read_link(path).map_err(failed(format!("readlink {}", path.display())))?;
        std::os::unix::fs::symlink(&link, &target).map_err(failed(format!("symlink {}", target.display())))?;
        return Ok(true);
    }
    if meta.is_dir() {
        fs::create_dir_all(&target).map_err(failed(format!("mkdir {}", target.display())))?;
    } else {
        fs::write(&target, b"").map_err(failed(format!("create {}", target.display())))?;
    }
    let (source, dest) = (c_path(path)?, c_path(&target)?);
    // Devices stay bind mounts: the overlay is `nodev`, and nobody locks a device node.
    if !read_only || !(meta.is_dir() || meta.is_file()) {
        sys::bind_mount(&source, &dest).map_err(failed(format!("bind {}", path.display())))?;
        if read_only {
            // A remount must keep the flags the kernel locked on the original (nosuid,
            // nodev, noexec in a user namespace), or it is refused.
            let locked = sys::mount_flags(&dest).map_err(failed(format!("statvfs {}", target.display())))?;
            sys::remount_bind(&dest, locked | libc::MS_RDONLY)
                .map_err(failed(format!("remount {} read-only", path.display())))?;
        }
        return Ok(true);
    }
    if meta.is_dir() {
        overlay(root, path, &target)?;
        return Ok(true);
    }
    if meta.len() <= MAX_COPIED_FILE && files.copies < MAX_FILES_COPIED {
        files.copies += 1;
        copy_read_only(path, &target)?;
        return Ok(true);
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(failed(format!("overlay {}", path.display()))(io::Error::other("no parent directory")));
    };
    files.push(dir, name, target);
    Ok(true)
}

/// Copy the host file `source` over the empty file `target` in the private root, with
/// its permission bits; the root is remounted read-only once complete, so the copy can
/// be neither written nor chmod-ed.
fn copy_read_only(source: &Path, target: &Path) -> Result<(), NamespaceError> {
    let what = || format!("copy {}", source.display());
    let mut from = fs::File::open(source).map_err(failed(what()))?;
    let mode = from.metadata().map_err(failed(what()))?.permissions();
    let mut to = fs::OpenOptions::new().write(true).truncate(true).open(target).map_err(failed(what()))?;
    // At most the size checked: a file that grew meanwhile is cut, not copied on.
    io::copy(&mut io::Read::take(&mut from, MAX_COPIED_FILE), &mut to).map_err(failed(what()))?;
    fs::set_permissions(target, mode).map_err(failed(what()))
}
