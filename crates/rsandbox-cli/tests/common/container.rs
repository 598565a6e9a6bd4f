//! A container runtime's default seccomp profile, emulated: installed between fork and
//! exec of the command under test. Shared by the CLI tests and the attack corpus.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// What a container runtime's default seccomp profile does to a process without
/// `CAP_SYS_ADMIN` (Docker's, Kubernetes' `RuntimeDefault`): no new namespaces, no
/// mounts, `clone3` unknown; everything else allowed.
pub fn container_default_program() -> std::sync::Arc<Vec<lockdown::bpf::Insn>> {
    use lockdown::bpf::{build, ret_errno, Decision, RET_ALLOW, RET_KILL_PROCESS};
    let eperm = || Decision::Return(ret_errno(libc::EPERM));
    let mut rules: Vec<(u32, Decision)> = [
        libc::SYS_unshare, libc::SYS_setns, libc::SYS_mount, libc::SYS_umount2, libc::SYS_pivot_root,
        libc::SYS_move_mount, libc::SYS_open_tree, libc::SYS_fsopen, libc::SYS_fsmount, libc::SYS_fspick,
        libc::SYS_mount_setattr,
    ]
    .iter()
    .map(|nr| (*nr as u32, eperm()))
    .collect();
    let namespaces = (libc::CLONE_NEWNS | libc::CLONE_NEWCGROUP | libc::CLONE_NEWUTS | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWNET) as u32;
    rules.push((libc::SYS_clone as u32, Decision::ErrnoIfAnyBit { arg: 0, mask: namespaces, errno: libc::EPERM }));
    rules.push((libc::SYS_clone3 as u32, Decision::Return(ret_errno(libc::ENOSYS))));
    std::sync::Arc::new(build(&rules, RET_ALLOW, RET_KILL_PROCESS).expect("the container profile builds"))
}

/// Run `command` as if in a default container: the profile above is installed between
/// fork and exec.
pub fn in_container_default(command: &mut Command) {
    let program = container_default_program();
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
