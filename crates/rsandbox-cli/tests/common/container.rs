//! The environments rsandbox must run in (or refuse in, saying why), emulated on this
//! machine between fork and exec of the command under test. Shared by the CLI tests and
//! the attack corpus:
//!
//! * a container runtime's default seccomp profile (Docker's, Kubernetes'
//!   `RuntimeDefault`): no new namespaces, no mounts;
//! * a kernel without Landlock (gVisor, old kernels): the Landlock calls are `ENOSYS`;
//! * a system without unprivileged user namespaces: `CLONE_NEWUSER` is refused;
//! * a plain `chroot` whose `/` is not a mount point (build roots, some CI images).

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

/// Namespace flags of `clone`.
const NAMESPACE_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;

/// What a container runtime's default seccomp profile does to a process without
/// `CAP_SYS_ADMIN` (Docker's, Kubernetes' `RuntimeDefault`): no new namespaces, no
/// mounts, `clone3` unknown; everything else allowed.
pub fn container_default_program() -> Arc<Vec<lockdown::bpf::Insn>> {
    use lockdown::bpf::{build, ret_errno, Decision, RET_ALLOW, RET_KILL_PROCESS};
    let eperm = || Decision::Return(ret_errno(libc::EPERM));
    let mut rules: Vec<(u32, Decision)> = [
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
    ]
    .iter()
    .map(|nr| (*nr as u32, eperm()))
    .collect();
    rules.push((libc::SYS_clone as u32, Decision::ErrnoIfAnyBit { arg: 0, mask: NAMESPACE_FLAGS, errno: libc::EPERM }));
    rules.push((libc::SYS_clone3 as u32, Decision::Return(ret_errno(libc::ENOSYS))));
    Arc::new(build(&rules, RET_ALLOW, RET_KILL_PROCESS).expect("the container profile builds"))
}

/// A kernel without Landlock: the three Landlock calls answer `ENOSYS`.
fn no_landlock_program() -> Arc<Vec<lockdown::bpf::Insn>> {
    use lockdown::bpf::{build, ret_errno, Decision, RET_ALLOW, RET_KILL_PROCESS};
    let rules: Vec<(u32, Decision)> =
        [libc::SYS_landlock_create_ruleset, libc::SYS_landlock_add_rule, libc::SYS_landlock_restrict_self]
            .iter()
            .map(|nr| (*nr as u32, Decision::Return(ret_errno(libc::ENOSYS))))
            .collect();
    Arc::new(build(&rules, RET_ALLOW, RET_KILL_PROCESS).expect("the no-Landlock profile builds"))
}

/// No unprivileged user namespaces (`kernel.unprivileged_userns_clone = 0`, or an
/// AppArmor restriction): `CLONE_NEWUSER` is refused with `EPERM`, `clone3` unknown.
fn no_userns_program() -> Arc<Vec<lockdown::bpf::Insn>> {
    use lockdown::bpf::{build, ret_errno, Decision, RET_ALLOW, RET_KILL_PROCESS};
    let newuser = libc::CLONE_NEWUSER as u32;
    let rules = vec![
        (libc::SYS_unshare as u32, Decision::ErrnoIfAnyBit { arg: 0, mask: newuser, errno: libc::EPERM }),
        (libc::SYS_clone as u32, Decision::ErrnoIfAnyBit { arg: 0, mask: newuser, errno: libc::EPERM }),
        (libc::SYS_clone3 as u32, Decision::Return(ret_errno(libc::ENOSYS))),
    ];
    Arc::new(build(&rules, RET_ALLOW, RET_KILL_PROCESS).expect("the no-userns profile builds"))
}

/// Install `program` between fork and exec of `command`.
fn with_filter(command: &mut Command, program: Arc<Vec<lockdown::bpf::Insn>>) {
    // SAFETY: the closure only calls prctl and seccomp(2) on a program built before the
    // fork; both are async-signal-safe and allocate nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            lockdown::bpf::install(&program, 0).map(drop)
        });
    }
}

/// Run `command` as if in a default container.
pub fn in_container_default(command: &mut Command) {
    with_filter(command, container_default_program());
}

/// Run `command` as on a kernel without Landlock.
pub fn without_landlock(command: &mut Command) {
    with_filter(command, no_landlock_program());
}

/// Run `command` where unprivileged user namespaces are refused.
pub fn without_user_namespaces(command: &mut Command) {
    with_filter(command, no_userns_program());
}

/// The chroot directory: one empty directory per top-level directory of `/` and the
/// same symlinks (`/bin -> usr/bin`); the directories are bound in each command's own
/// mount namespace, so nothing is mounted on the host and there is nothing to undo.
struct ChrootTree {
    root: PathBuf,
    /// Top-level directories to bind, `tmp` first (the tree itself lives under it).
    binds: Vec<(CString, CString)>,
    root_c: CString,
}

static CHROOT: OnceLock<ChrootTree> = OnceLock::new();

fn chroot_tree() -> &'static ChrootTree {
    CHROOT.get_or_init(|| {
        let root = Path::new("/tmp").join(format!("rsandbox-chroot-{}", std::process::id()));
        std::fs::create_dir_all(&root).expect("create the chroot directory");
        let mut binds = Vec::new();
        for entry in std::fs::read_dir("/").expect("read /") {
            let entry = entry.expect("an entry of /");
            let name = entry.file_name();
            let (from, to) = (Path::new("/").join(&name), root.join(&name));
            let kind = entry.file_type().expect("file type");
            if kind.is_symlink() {
                let target = std::fs::read_link(&from).expect("read a symlink of /");
                if std::fs::symlink_metadata(&to).is_err() {
                    std::os::unix::fs::symlink(target, &to).expect("copy a symlink of /");
                }
            } else if kind.is_dir() {
                std::fs::create_dir_all(&to).expect("create a mount point in the chroot");
                let pair = (CString::new(from.to_str().unwrap()).unwrap(), CString::new(to.to_str().unwrap()).unwrap());
                if name == "tmp" {
                    binds.insert(0, pair);
                } else {
                    binds.push(pair);
                }
            }
        }
        let root_c = CString::new(root.to_str().unwrap()).unwrap();
        ChrootTree { root, binds, root_c }
    })
}

/// `path` as a process in the chroot names it, when the host's view of it lies in the
/// chroot directory (`/proc/PID/exe` of a chrooted process reads through it).
#[allow(dead_code)] // used by the attack corpus only
pub fn outside_chroot(path: &Path) -> Option<PathBuf> {
    let tree = CHROOT.get()?;
    path.strip_prefix(&tree.root).ok().map(|rest| Path::new("/").join(rest))
}

/// Run `command` as a container's root whose runtime grants no `CAP_SYS_ADMIN` but
/// allows user namespaces (podman's default profile): the capability leaves the
/// bounding set, so the command's root never has it.
pub fn without_cap_sys_admin(command: &mut Command) {
    // SAFETY: prctl is async-signal-safe and allocates nothing.
    unsafe {
        command.pre_exec(|| {
            // CAP_SYS_ADMIN is capability 21 (<linux/capability.h>).
            if libc::prctl(libc::PR_CAPBSET_DROP, 21, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Run `command` (as root) inside a chroot whose `/` is not a mount point: every
/// top-level directory of the host is bound into a plain directory, in a mount
/// namespace of the command's own, and the command is `chroot`ed there.
pub fn in_chroot(command: &mut Command) {
    let tree = chroot_tree();
    assert!(tree.root.is_dir());
    // SAFETY: the closure makes only async-signal-safe system calls (unshare, mount,
    // chroot, chdir) on strings built before the fork.
    unsafe {
        command.pre_exec(move || {
            let check = |rc: libc::c_int| if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) };
            check(libc::unshare(libc::CLONE_NEWNS))?;
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            for (from, to) in &tree.binds {
                check(libc::mount(
                    from.as_ptr(),
                    to.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ))?;
            }
            check(libc::chroot(tree.root_c.as_ptr()))?;
            check(libc::chdir(c"/".as_ptr()))
        });
    }
}
