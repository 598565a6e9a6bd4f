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
    let new_root = quota.path.clone();
    sys::mount_at(&c_path(&new_root)?, "tmpfs", libc::MS_NOSUID | libc::MS_NODEV, "size=1m,mode=0755")
        .map_err(failed("tmpfs root"))?;
    // An empty lower layer: an overlay without an upper layer needs two lower ones.
    // Both helper directories go once every tree is in place.
    let empty = new_root.join(EMPTY_LAYER);
    let stage = new_root.join(STAGE);
    for dir in [&empty, &stage] {
        fs::create_dir(dir).map_err(failed(format!("mkdir {}", dir.display())))?;
    }
    let mut entries: Vec<(&PathBuf, bool)> = Vec::new();
    entries.extend(policy.read_only.iter().map(|p| (p, true)));
    entries.extend(policy.executable.iter().map(|p| (p, true)));
    entries.extend(policy.read_write.iter().filter(|p| **p != quota.path).map(|p| (p, false)));
    // Parents before children; a path inside one already bound comes with it, unless
    // it is writable inside a read-only one (then it is bound over it, read-write).
    entries.sort_by_key(|(p, _)| p.components().count());
    let mut bound: Vec<(&PathBuf, bool)> = Vec::new();
    for (path, read_only) in entries {
        if bound.iter().any(|(b, b_read_only)| path.starts_with(b) && (read_only || !b_read_only)) {
            continue;
        }
        if replicate(&new_root, path, read_only)? {
            bound.push((path, read_only));
        }
    }
    for visible in &policy.visible_only {
        show_only(&new_root, visible)?;
    }
    for dir in [&empty, &stage] {
        fs::remove_dir(dir).map_err(failed(format!("rmdir {}", dir.display())))?;
    }
    mount_workspace(&new_root, quota, owner)?;
    let old = new_root.join(".old-root");
    fs::create_dir(&old).map_err(failed("mkdir .old-root"))?;
    sys::pivot_root(&c_path(&new_root)?, &c_path(&old)?).map_err(failed("pivot_root"))?;
    std::env::set_current_dir("/").map_err(failed("chdir /"))?;
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
fn show_only(root: &Path, visible: &crate::policy::VisibleOnly) -> Result<(), NamespaceError> {
    let target = join(root, &visible.dir);
    if !target.is_dir() {
        return Ok(()); // not part of this root: nothing of it is visible anyway
    }
    sys::mount_at(&c_path(&target)?, "tmpfs", libc::MS_NOSUID | libc::MS_NODEV, "size=1m,mode=0755")
        .map_err(failed(format!("tmpfs over {}", visible.dir.display())))?;
    for entry in &visible.entries {
        replicate(root, &visible.dir.join(entry), true)?;
    }
    // The cover itself read-only, like the rest of the skeleton.
    sys::remount_bind(&c_path(&target)?, libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV)
        .map_err(failed(format!("remount {} read-only", visible.dir.display())))
}

/// The empty directory under the new root that is every overlay's bottom layer.
const EMPTY_LAYER: &str = ".rsandbox-empty-layer";
/// Where a file's directory is overlaid before the file is bound into place.
const STAGE: &str = ".rsandbox-stage";

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
    sys::mount(Some("overlay"), &target.to_string_lossy(), Some("overlay"), flags, Some(&options))
        .map_err(failed(format!("overlay {}", source.display())))
}

/// Recreate `path` under `root`: a symlink as the same symlink; a directory or file
/// read-only as a read-only overlay (a file: its directory is overlaid on the stage and
/// the file bound from there), read-write as a bind mount. Returns false for a path that
/// does not exist.
fn replicate(root: &Path, path: &Path, read_only: bool) -> Result<bool, NamespaceError> {
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
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(failed(format!("overlay {}", path.display()))(io::Error::other("no parent directory")));
    };
    let stage = root.join(STAGE);
    overlay(root, dir, &stage)?;
    let bound = sys::bind_mount(&c_path(&stage.join(name))?, &dest).map_err(failed(format!("bind {}", path.display())));
    // The bind keeps the overlay alive; the stage is free for the next file.
    sys::umount_detach(&stage.to_string_lossy()).map_err(failed(format!("umount the stage of {}", path.display())))?;
    bound?;
    Ok(true)
}
