//! Step 3: identity and privileges. Root becomes an unprivileged uid/gid with securebits
//! locked so it can never regain capabilities; every process ends with empty capability
//! sets, an empty bounding set, and no_new_privs.

use crate::errors::PrivilegeError;
use crate::policy::Identity;
use crate::sys;

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

/// Drop to `run_as` (when given; the caller passes it only when running as root), then
/// drop every capability and set no_new_privs. Verifies the result before returning.
pub fn drop_privileges(run_as: Option<Identity>) -> Result<(), PrivilegeError> {
    let caps = |call| move |source| PrivilegeError::Capabilities { call, source };
    let setid = |call| move |source| PrivilegeError::SetId { call, source };

    // The bounding set can only shrink while we still hold CAP_SETPCAP (root, or any
    // process inside its own user namespace).
    let (_, permitted) = sys::capabilities().map_err(caps("capget"))?;
    if permitted != 0 {
        for cap in 0..64 {
            match sys::drop_bounding_capability(cap) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break,
                Err(e) => return Err(caps("prctl PR_CAPBSET_DROP")(e)),
            }
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
