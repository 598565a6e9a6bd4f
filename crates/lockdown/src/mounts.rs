//! Step 2b: a private, size-limited tmpfs over the workspace — the disk quota. In a new
//! mount namespace (so the host never sees it, and it vanishes with the sandbox), owned
//! by the sandbox's identity, `nosuid,nodev`. Files written there count against its size,
//! not against the host disk; RLIMIT_FSIZE still caps each file.

use crate::errors::NamespaceError;
use crate::policy::{Identity, WorkspaceQuota};
use crate::sys;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

/// Mount the quota'd tmpfs over `quota.path` and make it the working directory.
/// `owner` is who will own it after the identity switch (our own ids when not root).
pub fn mount_workspace_tmpfs(quota: &WorkspaceQuota, owner: Identity) -> Result<(), NamespaceError> {
    let err = |what: &str| {
        let what = what.to_string();
        move |source| NamespaceError::Unshare { what, source }
    };
    sys::unshare(libc::CLONE_NEWNS).map_err(err("mount"))?;
    // Nothing mounted here may propagate back to the host's mount table.
    sys::mount(None, "/", None, libc::MS_REC | libc::MS_PRIVATE, None).map_err(err("mount (make / private)"))?;
    let target = CString::new(quota.path.as_os_str().as_bytes())
        .map_err(|_| NamespaceError::Unshare { what: "mount".into(), source: std::io::Error::other("NUL in path") })?;
    let options = format!("size={},mode=0700,uid={},gid={}", quota.bytes, owner.uid, owner.gid);
    sys::mount_at(&target, "tmpfs", libc::MS_NOSUID | libc::MS_NODEV, &options).map_err(err("tmpfs workspace"))?;
    std::env::set_current_dir(&quota.path).map_err(err("chdir into the tmpfs workspace"))
}
