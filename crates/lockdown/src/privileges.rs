//! Step 3: identity and privileges. Root becomes an unprivileged uid/gid with securebits
//! locked so it can never regain capabilities; every process ends with empty capability
//! sets, an empty bounding set, and no_new_privs.

use crate::errors::PrivilegeError;
use crate::policy::Identity;
use crate::sys;
use std::sync::atomic::{AtomicBool, Ordering};

// From <linux/securebits.h>: keep root from meaning "all capabilities", and lock that.
const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;

const LOCKED_SECUREBITS: libc::c_ulong = SECBIT_NOROOT
    | SECBIT_NOROOT_LOCKED
    | SECBIT_NO_SETUID_FIXUP
    | SECBIT_NO_SETUID_FIXUP_LOCKED
    | SECBIT_KEEP_CAPS_LOCKED
    | SECBIT_NO_CAP_AMBIENT_RAISE
    | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;

/// Set in a process whose bounding set [`empty_bounding_set`] emptied; its forks inherit
/// the flag with the set.
static BOUNDING_SET_EMPTY: AtomicBool = AtomicBool::new(false);

/// Empty the calling process's bounding set once (the zygote, as root, before it forks
/// any sandbox), so that [`drop_privileges`] need not do it again in every child: ~40
/// `prctl` calls, a tenth of a child's lockdown. The zygote keeps its effective and
/// permitted capabilities (it needs them for the children's namespaces and mounts); the
/// bounding set only caps what an `execve` may grant, and the zygote never executes a
/// program. Its children inherit the empty set through `fork`; only entering a user
/// namespace fills it again, which is why [`drop_privileges`] is told when none was
/// entered. On failure nothing is recorded, and each child empties its own set as before.
pub fn empty_bounding_set() -> Result<(), PrivilegeError> {
    drop_bounding_set()?;
    BOUNDING_SET_EMPTY.store(true, Ordering::Relaxed);
    Ok(())
}

fn drop_bounding_set() -> Result<(), PrivilegeError> {
    for cap in 0..64 {
        match sys::drop_bounding_capability(cap) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break,
            Err(source) => return Err(PrivilegeError::Capabilities { call: "prctl PR_CAPBSET_DROP", source }),
        }
    }
    Ok(())
}

/// Drop to `run_as` (when given; the caller passes it only when running as root), then
/// drop every capability and set no_new_privs. Verifies the result before returning.
/// `no_user_namespace_entered`: this process has not entered a user namespace since it
/// was forked (one would have given it a full bounding set), so a bounding set that
/// [`empty_bounding_set`] emptied in its parent is still empty.
pub fn drop_privileges(run_as: Option<Identity>, no_user_namespace_entered: bool) -> Result<(), PrivilegeError> {
    let caps = |call| move |source| PrivilegeError::Capabilities { call, source };
    let setid = |call| move |source| PrivilegeError::SetId { call, source };

    // The bounding set can only shrink while we still hold CAP_SETPCAP (root, or any
    // process inside its own user namespace).
    let (_, permitted) = sys::capabilities().map_err(caps("capget"))?;
    if permitted != 0 {
        if !(no_user_namespace_entered && BOUNDING_SET_EMPTY.load(Ordering::Relaxed)) {
            drop_bounding_set()?;
        }
        sys::set_securebits(LOCKED_SECUREBITS).map_err(caps("prctl PR_SET_SECUREBITS"))?;
    }
    sys::clear_ambient_capabilities().map_err(caps("prctl PR_CAP_AMBIENT"))?;
    if let Some(id) = run_as {
        sys::clear_supplementary_groups().map_err(setid("setgroups"))?;
        sys::set_all_gids(id.gid).map_err(setid("setresgid"))?;
        sys::set_all_uids(id.uid).map_err(setid("setresuid"))?;
    }
    sys::clear_capabilities().map_err(caps("capset"))?;
    sys::set_no_new_privs().map_err(PrivilegeError::NoNewPrivs)?;
    verify(run_as)
}

/// Fail closed: check what the kernel now says rather than trusting the calls above.
fn verify(run_as: Option<Identity>) -> Result<(), PrivilegeError> {
    let fail = |what: String| Err(PrivilegeError::Verification(what));
    let (uids, gids) = sys::ids().map_err(|source| PrivilegeError::SetId { call: "getresuid", source })?;
    if let Some(id) = run_as {
        if uids != [id.uid; 3] || gids != [id.gid; 3] {
            return fail(format!("ids are {uids:?}/{gids:?}, wanted {}/{}", id.uid, id.gid));
        }
    }
    if uids.contains(&0) {
        return fail("a uid is still 0".into());
    }
    let (effective, permitted) =
        sys::capabilities().map_err(|source| PrivilegeError::Capabilities { call: "capget", source })?;
    if effective != 0 || permitted != 0 {
        return fail(format!("capabilities remain (effective {effective:#x}, permitted {permitted:#x})"));
    }
    match sys::no_new_privs() {
        Ok(true) => Ok(()),
        Ok(false) => fail("no_new_privs is not set".into()),
        Err(e) => Err(PrivilegeError::NoNewPrivs(e)),
    }
}

/// The capabilities root needs to give each sandbox a user of its own (`chown` of the
/// workspace, `setresgid`/`setgroups`, `setresuid`) that the calling process lacks in
/// its effective set: empty for an ordinary root. Root without them (a container started
/// with `--cap-drop ALL`) is uid 0 with no way to leave it, and the kernel enforces no
/// `RLIMIT_NPROC` on uid 0's processes, so a sandbox's process limit would not hold.
pub fn missing_root_capabilities() -> std::io::Result<Vec<&'static str>> {
    use rustix::thread::CapabilitySet as Cap;
    let (effective, _) = sys::capabilities()?;
    let effective = Cap::from_bits_retain(effective);
    let needed = [(Cap::CHOWN, "CAP_CHOWN"), (Cap::SETUID, "CAP_SETUID"), (Cap::SETGID, "CAP_SETGID")];
    Ok(needed.iter().filter(|(cap, _)| !effective.contains(*cap)).map(|(_, name)| *name).collect())
}

/// Whether the calling process may create namespaces itself (`CAP_SYS_ADMIN` in its
/// effective set). A container's root usually may not: its runtime grants root a few
/// capabilities, not that one.
pub fn can_create_namespaces() -> std::io::Result<bool> {
    let (effective, _) = sys::capabilities()?;
    Ok(rustix::thread::CapabilitySet::from_bits_retain(effective).contains(rustix::thread::CapabilitySet::SYS_ADMIN))
}

/// Root that may switch users but not create namespaces: become the sandbox's user now,
/// before the namespaces, so that it creates them as an ordinary user does (a user
/// namespace first, mapping its own uid). `setresuid` from root cleared the capabilities
/// and the dumpable flag; the flag is set again because a non-dumpable process cannot
/// write its user namespace's id maps (step 3 clears it for good).
pub fn become_identity_before_namespaces(id: Identity) -> Result<(), PrivilegeError> {
    let setid = |call| move |source| PrivilegeError::SetId { call, source };
    sys::clear_supplementary_groups().map_err(setid("setgroups"))?;
    sys::set_all_gids(id.gid).map_err(setid("setresgid"))?;
    sys::set_all_uids(id.uid).map_err(setid("setresuid"))?;
    sys::set_dumpable().map_err(|source| PrivilegeError::Capabilities { call: "prctl PR_SET_DUMPABLE", source })?;
    let (uids, gids) = sys::ids().map_err(setid("getresuid"))?;
    if uids != [id.uid; 3] || gids != [id.gid; 3] {
        return Err(PrivilegeError::Verification(format!("ids are {uids:?}/{gids:?}, wanted {}/{}", id.uid, id.gid)));
    }
    Ok(())
}
