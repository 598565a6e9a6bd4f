//! Step 2: namespaces. Network, IPC and UTS namespaces cut the sandbox off from host
//! sockets (including abstract unix sockets), SysV IPC and the host name. Without root a
//! user namespace comes first (it grants the right to create the others), mapping our own
//! uid and gid to themselves so nothing gains an identity.

use crate::errors::NamespaceError;
use crate::sys;
use std::fs;

/// Namespaces created, by name.
pub type Created = Vec<&'static str>;

const OTHERS: [(libc::c_int, &str); 3] =
    [(libc::CLONE_NEWNET, "net"), (libc::CLONE_NEWIPC, "ipc"), (libc::CLONE_NEWUTS, "uts")];

/// Create the namespaces. With `best_effort` a kernel refusal yields fewer namespaces
/// instead of an error.
pub fn enter_namespaces(as_root: bool, best_effort: bool) -> Result<Created, NamespaceError> {
    let mut created = Vec::new();
    if !as_root {
        match enter_user_namespace() {
            Ok(()) => created.push("user"),
            // Without a user namespace the others cannot be created either.
            Err(e) if tolerated(&e, best_effort) => return Ok(created),
            Err(e) => return Err(e),
        }
    }
    let flags = OTHERS.iter().fold(0, |acc, (flag, _)| acc | flag);
    match sys::unshare(flags) {
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

fn enter_user_namespace() -> Result<(), NamespaceError> {
    let (uids, gids) = sys::ids().map_err(|source| NamespaceError::Unshare { what: "user".into(), source })?;
    sys::unshare(libc::CLONE_NEWUSER).map_err(|source| NamespaceError::Unshare { what: "user".into(), source })?;
    let write = |file: &'static str, text: String| {
        fs::write(file, text).map_err(|source| NamespaceError::IdMap { file, source })
    };
    // setgroups must be denied before an unprivileged process may write gid_map.
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{0} {0} 1\n", uids[1]))?;
    write("/proc/self/gid_map", format!("{0} {0} 1\n", gids[1]))
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
