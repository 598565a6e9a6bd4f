//! The seccomp layer: an allowlist (default deny) plus filters that turn specific
//! calls into errors R understands or into reported violations.
//!
//! Filters stack, and for each system call the kernel takes the most severe answer of
//! all installed filters (`TRAP` beats `ERRNO` beats `ALLOW`), so each filter below has
//! one job:
//!
//! | filter        | matches                                   | answer         |
//! |---------------|-------------------------------------------|----------------|
//! | allowlist     | ordinary calls (and those below)          | allow, else `ENOSYS` |
//! | no sockets    | `socket`, `socketpair` (network off)      | `EACCES`       |
//! | refusals      | `setsid`, `setpgid`, by-path `chmod`/`utimes`, `prlimit`/`setpriority`/`sched_setaffinity` on another pid | `EPERM` |
//! | violations    | kernel attack surface, exec, ns clones    | `SIGSYS` (trap)|
//!
//! `ENOSYS` for unknown calls makes glibc fall back (e.g. `clone3` to `clone`, which
//! OpenMP needs). Refusing `setsid`/`setpgid` keeps every descendant in the sandbox's
//! process group, so one `kill(-pgid)` ends them all.
//!
//! A violation is never executed. With a report socket, the violations filter answers
//! `SECCOMP_RET_USER_NOTIF` instead of `SIGSYS`, and its listener fd is sent over that
//! socket to the supervisor, which learns the call and the pid and ends the sandbox. A
//! signal would not do: glibc's `posix_spawn` (used by R's `system()`) resets handlers
//! and blocks signals in the child, which then dies silently with SIGSYS. The child
//! closes its copy of the listener before any untrusted code runs: whoever holds it could
//! let forbidden calls through (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`).

use crate::errors::{PolicyError, SeccompError};
use crate::sys;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;
use std::os::fd::{BorrowedFd, RawFd};

/// How a system call is treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Treatment {
    /// Allowed.
    Allow,
    /// Allowed only when the policy lists executables; otherwise a violation.
    Exec,
    /// Creates a socket: `EACCES` when the network is off.
    SocketCreate,
    /// Acts on a socket's address (connect, bind, ...): allowed only with network on.
    SocketAddress,
    /// Refused with `EPERM`: leaving the process group (`setsid`, `setpgid`), and
    /// changing file metadata by path (`chmod`, `utimes`, ...). Landlock does not cover
    /// metadata, and a sandbox started by an ordinary user shares that user's uid, so
    /// by-path metadata calls could reach the user's own files.
    Refused,
    /// Kernel attack surface: a violation that ends the sandbox.
    Violation,
}

use Treatment::*;

macro_rules! table {
    ($($name:ident => $t:expr),* $(,)?) => {
        /// Every system call the filters name, with its treatment. Anything else gets `ENOSYS`.
        pub const SYSCALLS: &[(&str, libc::c_long, Treatment)] = &[
            $((stringify!($name), libc::$name, $t)),*
        ];
    };
}

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;

#[cfg(target_arch = "x86_64")]
table! {
    // memory
    SYS_brk => Allow, SYS_mmap => Allow, SYS_munmap => Allow, SYS_mprotect => Allow,
    SYS_mremap => Allow, SYS_madvise => Allow, SYS_msync => Allow, SYS_mincore => Allow,
    SYS_membarrier => Allow, SYS_get_mempolicy => Allow, SYS_memfd_create => Allow,
    // files (Landlock decides which paths)
    SYS_read => Allow, SYS_write => Allow, SYS_open => Allow, SYS_openat => Allow,
    SYS_openat2 => Allow, SYS_creat => Allow, SYS_close => Allow, SYS_close_range => Allow,
    SYS_stat => Allow, SYS_fstat => Allow, SYS_lstat => Allow, SYS_newfstatat => Allow,
    SYS_statx => Allow, SYS_statfs => Allow, SYS_fstatfs => Allow, SYS_lseek => Allow,
    SYS_pread64 => Allow, SYS_pwrite64 => Allow, SYS_readv => Allow, SYS_writev => Allow,
    SYS_preadv => Allow, SYS_pwritev => Allow, SYS_preadv2 => Allow, SYS_pwritev2 => Allow,
    SYS_access => Allow, SYS_faccessat => Allow, SYS_faccessat2 => Allow,
    SYS_ioctl => Allow, SYS_fcntl => Allow, SYS_flock => Allow, SYS_fsync => Allow,
    SYS_fdatasync => Allow, SYS_truncate => Allow, SYS_ftruncate => Allow,
    SYS_fallocate => Allow, SYS_fadvise64 => Allow, SYS_readahead => Allow,
    SYS_getdents => Allow, SYS_getdents64 => Allow, SYS_getcwd => Allow, SYS_chdir => Allow,
    SYS_fchdir => Allow, SYS_rename => Allow, SYS_renameat => Allow, SYS_renameat2 => Allow,
    SYS_mkdir => Allow, SYS_mkdirat => Allow, SYS_rmdir => Allow, SYS_link => Allow,
    SYS_linkat => Allow, SYS_unlink => Allow, SYS_unlinkat => Allow, SYS_symlink => Allow,
    SYS_symlinkat => Allow, SYS_readlink => Allow, SYS_readlinkat => Allow,
    SYS_chmod => Refused, SYS_fchmod => Allow, SYS_fchmodat => Refused, SYS_umask => Allow,
    SYS_utime => Refused, SYS_utimes => Refused, SYS_utimensat => Allow, SYS_futimesat => Refused,
    SYS_getxattr => Allow, SYS_lgetxattr => Allow, SYS_fgetxattr => Allow,
    SYS_listxattr => Allow, SYS_llistxattr => Allow, SYS_flistxattr => Allow,
    SYS_dup => Allow, SYS_dup2 => Allow, SYS_dup3 => Allow, SYS_pipe => Allow,
    SYS_pipe2 => Allow, SYS_sendfile => Allow, SYS_splice => Allow, SYS_tee => Allow,
    SYS_copy_file_range => Allow, SYS_sync_file_range => Allow,
    // waiting and polling
    SYS_poll => Allow, SYS_ppoll => Allow, SYS_select => Allow, SYS_pselect6 => Allow,
    SYS_epoll_create => Allow, SYS_epoll_create1 => Allow, SYS_epoll_ctl => Allow,
    SYS_epoll_wait => Allow, SYS_epoll_pwait => Allow, SYS_epoll_pwait2 => Allow,
    SYS_eventfd => Allow, SYS_eventfd2 => Allow, SYS_signalfd => Allow, SYS_signalfd4 => Allow,
    SYS_timerfd_create => Allow, SYS_timerfd_settime => Allow, SYS_timerfd_gettime => Allow,
    SYS_futex => Allow, SYS_set_robust_list => Allow, SYS_get_robust_list => Allow,
    SYS_nanosleep => Allow, SYS_clock_nanosleep => Allow, SYS_pause => Allow,
    SYS_sched_yield => Allow,
    // time
    SYS_clock_gettime => Allow, SYS_clock_getres => Allow, SYS_gettimeofday => Allow,
    SYS_time => Allow, SYS_times => Allow, SYS_alarm => Allow, SYS_getitimer => Allow,
    SYS_setitimer => Allow, SYS_timer_create => Allow, SYS_timer_settime => Allow,
    SYS_timer_gettime => Allow, SYS_timer_getoverrun => Allow, SYS_timer_delete => Allow,
    // signals (Landlock scopes who can be signalled)
    SYS_rt_sigaction => Allow, SYS_rt_sigprocmask => Allow, SYS_rt_sigreturn => Allow,
    SYS_rt_sigpending => Allow, SYS_rt_sigtimedwait => Allow, SYS_rt_sigsuspend => Allow,
    SYS_rt_sigqueueinfo => Allow, SYS_rt_tgsigqueueinfo => Allow, SYS_sigaltstack => Allow,
    SYS_kill => Allow, SYS_tkill => Allow, SYS_tgkill => Allow, SYS_restart_syscall => Allow,
    // processes and threads
    SYS_clone => Allow, SYS_fork => Allow, SYS_vfork => Allow, SYS_wait4 => Allow,
    SYS_waitid => Allow, SYS_exit => Allow, SYS_exit_group => Allow,
    SYS_set_tid_address => Allow, SYS_arch_prctl => Allow, SYS_prctl => Allow,
    SYS_rseq => Allow, SYS_gettid => Allow, SYS_getpid => Allow, SYS_getppid => Allow,
    SYS_getpgrp => Allow, SYS_getpgid => Allow, SYS_getsid => Allow,
    SYS_getuid => Allow, SYS_geteuid => Allow, SYS_getgid => Allow, SYS_getegid => Allow,
    SYS_getresuid => Allow, SYS_getresgid => Allow, SYS_getgroups => Allow,
    SYS_getrlimit => Allow, SYS_setrlimit => Allow, SYS_prlimit64 => Allow,
    SYS_getrusage => Allow, SYS_getpriority => Allow, SYS_setpriority => Allow,
    SYS_sched_getaffinity => Allow, SYS_sched_setaffinity => Allow,
    SYS_sched_getparam => Allow, SYS_sched_getscheduler => Allow,
    SYS_sched_get_priority_max => Allow, SYS_sched_get_priority_min => Allow,
    SYS_sched_getattr => Allow, SYS_getcpu => Allow, SYS_uname => Allow, SYS_sysinfo => Allow,
    SYS_getrandom => Allow, SYS_capget => Allow,
    // sockets that already exist (the sandbox's own channel)
    SYS_sendto => Allow, SYS_recvfrom => Allow, SYS_sendmsg => Allow, SYS_recvmsg => Allow,
    SYS_sendmmsg => Allow, SYS_recvmmsg => Allow, SYS_shutdown => Allow,
    SYS_getsockname => Allow, SYS_getpeername => Allow, SYS_getsockopt => Allow,
    SYS_setsockopt => Allow,
    SYS_socket => SocketCreate, SYS_socketpair => SocketCreate,
    SYS_connect => SocketAddress, SYS_bind => SocketAddress, SYS_listen => SocketAddress,
    SYS_accept => SocketAddress, SYS_accept4 => SocketAddress,
    SYS_setsid => Refused, SYS_setpgid => Refused,
    SYS_execve => Exec, SYS_execveat => Exec,
    // kernel attack surface and escapes
    SYS_ptrace => Violation, SYS_process_vm_readv => Violation,
    SYS_process_vm_writev => Violation, SYS_kcmp => Violation, SYS_pidfd_getfd => Violation,
    SYS_mount => Violation, SYS_umount2 => Violation, SYS_pivot_root => Violation,
    SYS_chroot => Violation, SYS_move_mount => Violation, SYS_open_tree => Violation,
    SYS_fsopen => Violation, SYS_fsmount => Violation, SYS_fsconfig => Violation,
    SYS_fspick => Violation, SYS_mount_setattr => Violation,
    SYS_unshare => Violation, SYS_setns => Violation,
    SYS_bpf => Violation, SYS_perf_event_open => Violation, SYS_userfaultfd => Violation,
    SYS_io_uring_setup => Violation, SYS_io_uring_enter => Violation,
    SYS_io_uring_register => Violation,
    SYS_keyctl => Violation, SYS_add_key => Violation, SYS_request_key => Violation,
    SYS_kexec_load => Violation, SYS_kexec_file_load => Violation,
    SYS_init_module => Violation, SYS_finit_module => Violation,
    SYS_delete_module => Violation, SYS_reboot => Violation, SYS_swapon => Violation,
    SYS_swapoff => Violation, SYS_acct => Violation, SYS_quotactl => Violation,
    SYS_syslog => Violation, SYS_iopl => Violation, SYS_ioperm => Violation,
    SYS_open_by_handle_at => Violation, SYS_name_to_handle_at => Violation,
    SYS_fanotify_init => Violation, SYS_lookup_dcookie => Violation,
    SYS_vhangup => Violation, SYS_personality => Violation,
    SYS_settimeofday => Violation, SYS_clock_settime => Violation,
    SYS_clock_adjtime => Violation, SYS_adjtimex => Violation,
    SYS_sethostname => Violation, SYS_setdomainname => Violation,
}

/// Namespace flags that make `clone` a violation (`clone3` is refused with `ENOSYS`).
const NAMESPACE_CLONE_FLAGS: [libc::c_int; 7] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// `ioctl` requests that act on another terminal's input or console: violations.
const FORBIDDEN_IOCTLS: [libc::c_ulong; 2] = [libc::TIOCSTI, libc::TIOCLINUX];

/// What the filters must let through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SeccompProfile {
    /// `execve`/`execveat` allowed (Landlock still decides which files).
    pub exec: bool,
    /// Sockets may be created and connected.
    pub network: bool,
}

/// Compiled filters, built once (in the zygote) and installed in each child.
#[derive(Clone, Debug)]
pub struct SeccompFilters {
    /// Allowlist and errno filters, allowlist first.
    programs: Vec<BpfProgram>,
    /// The violations filter (answers `TRAP`).
    violations: BpfProgram,
}

/// The name of a system call number this module knows, for reports.
pub fn syscall_name(nr: libc::c_long) -> Option<&'static str> {
    if nr == libc::SYS_clone3 {
        return Some("clone3");
    }
    SYSCALLS.iter().find(|(_, n, _)| *n == nr).map(|(name, _, _)| name.trim_start_matches("SYS_"))
}

fn rule_set(
    pick: impl Fn(Treatment) -> bool,
) -> BTreeMap<i64, Vec<SeccompRule>> {
    SYSCALLS.iter().filter(|(_, _, t)| pick(*t)).map(|(_, nr, _)| (*nr, Vec::new())).collect()
}

fn masked_rule(arg: u8, mask: u64, value: u64) -> Result<SeccompRule, seccompiler::BackendError> {
    let cond = SeccompCondition::new(arg, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(mask), value)?;
    SeccompRule::new(vec![cond])
}

impl SeccompFilters {
    /// Build and compile the filters for a profile. Pure: touches no kernel state.
    pub fn build(profile: SeccompProfile) -> Result<Self, PolicyError> {
        let err = |e: &dyn std::fmt::Display| PolicyError::Seccomp(e.to_string());
        let compile = |rules, mismatch, on_match| -> Result<BpfProgram, PolicyError> {
            let filter = SeccompFilter::new(rules, mismatch, on_match, ARCH).map_err(|e| err(&e))?;
            BpfProgram::try_from(filter).map_err(|e| err(&e))
        };

        // Violations pass the allowlist on purpose: the kernel picks the most severe
        // answer, and ERRNO outranks USER_NOTIF, so an ENOSYS here would hide them.
        let allowed = rule_set(|t| match t {
            Allow | SocketCreate | Refused | Exec | Violation => true,
            SocketAddress => profile.network,
        });
        let mut programs = vec![compile(allowed, SeccompAction::Errno(libc::ENOSYS as u32), SeccompAction::Allow)?];

        if !profile.network {
            let sockets = rule_set(|t| t == SocketCreate);
            programs.push(compile(sockets, SeccompAction::Allow, SeccompAction::Errno(libc::EACCES as u32))?);
        }
        let mut refused = rule_set(|t| t == Refused);
        // Calls that may act on the caller only: a same-uid process (the zygote, the
        // user's own programs) is out of Landlock's reach for these. `utimensat` with a
        // path is the by-path form; with NULL it is `futimens` on an open fd.
        // Whole 64-bit compare: garbage in the upper half can only make a call refused.
        let nonzero = |arg: u8| {
            SeccompCondition::new(arg, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0).and_then(|c| SeccompRule::new(vec![c]))
        };
        let self_only = [
            (libc::SYS_prlimit64, vec![0]),
            (libc::SYS_sched_setaffinity, vec![0]),
            (libc::SYS_setpriority, vec![0, 1]),
            (libc::SYS_utimensat, vec![1]),
        ];
        for (nr, args) in self_only {
            let rules = args.into_iter().map(nonzero).collect::<Result<Vec<_>, _>>().map_err(|e| err(&e))?;
            refused.insert(nr, rules);
        }
        programs.push(compile(refused, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32))?);

        let mut violations = rule_set(|t| t == Violation || (t == Exec && !profile.exec));
        let clone_rules = NAMESPACE_CLONE_FLAGS
            .iter()
            .map(|flag| masked_rule(0, *flag as u64, *flag as u64))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| err(&e))?;
        violations.insert(libc::SYS_clone, clone_rules);
        let ioctl_rules = FORBIDDEN_IOCTLS
            .iter()
            .map(|req| {
                SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, *req)
                    .and_then(|c| SeccompRule::new(vec![c]))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| err(&e))?;
        violations.insert(libc::SYS_ioctl, ioctl_rules);
        let violations = compile(violations, SeccompAction::Allow, SeccompAction::Trap)?;
        Ok(SeccompFilters { programs, violations })
    }

    /// Number of BPF instructions over all filters (for tests and `check`).
    pub fn instruction_count(&self) -> usize {
        self.programs.iter().map(Vec::len).sum::<usize>() + self.violations.len()
    }

    /// Install every filter in this thread (irreversible). With `report_socket`,
    /// violations go to a user-notification listener sent over that unix socket;
    /// without it, a violation kills the process with SIGSYS.
    pub fn install(&self, report_socket: Option<RawFd>) -> Result<(), SeccompError> {
        match report_socket {
            Some(socket) => {
                let listener = install_with_listener(&notify_instead_of_trap(&self.violations))?;
                // SAFETY: both fds are open for the duration of the call: the caller's
                // report socket, and the listener the kernel just gave us.
                let (socket, listener_fd) = unsafe { (BorrowedFd::borrow_raw(socket), BorrowedFd::borrow_raw(listener)) };
                let sent = crate::fdpass::send(socket, b"L", &[listener_fd]);
                // Close our copy whatever happened: nobody in the sandbox may hold it.
                sys::close(listener);
                sent.map_err(SeccompError::Report)?;
            }
            None => seccompiler::apply_filter(&self.violations).map_err(|e| SeccompError::Install(e.to_string()))?,
        }
        // The allowlist (first built) goes in last: it does not allow seccomp(2) itself,
        // so any filter installed after it would be refused.
        for program in self.programs.iter().rev() {
            seccompiler::apply_filter(program).map_err(|e| SeccompError::Install(e.to_string()))?;
        }
        Ok(())
    }
}

/// seccompiler has no user-notification action: compile with `TRAP`, then rewrite
/// every `return TRAP` instruction into `return USER_NOTIF`.
fn notify_instead_of_trap(program: &BpfProgram) -> BpfProgram {
    const BPF_RET_K: u16 = 0x06;
    const SECCOMP_RET_TRAP: u32 = 0x0003_0000;
    let mut patched = program.clone();
    for insn in patched.iter_mut().filter(|i| i.code == BPF_RET_K && i.k == SECCOMP_RET_TRAP) {
        insn.k = libc::SECCOMP_RET_USER_NOTIF;
    }
    patched
}

fn install_with_listener(program: &BpfProgram) -> Result<RawFd, SeccompError> {
    let prog = libc::sock_fprog { len: program.len() as u16, filter: program.as_ptr() as *mut libc::sock_filter };
    // SAFETY: seccompiler's sock_filter has the kernel's layout (u16, u8, u8, u32), and
    // the kernel copies the program during the call; no_new_privs is already set.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    if fd < 0 {
        return Err(SeccompError::Install(format!(
            "seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER): {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(fd as RawFd)
}

/// One pending notification from a listener: (pid, system call number) and its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Notification {
    /// Kernel id, for [`deny_notification`].
    pub id: u64,
    /// The process (in the listener's pid namespace).
    pub pid: u32,
    /// The system call number.
    pub syscall: i64,
}

/// Receive one notification (`SECCOMP_IOCTL_NOTIF_RECV`).
pub fn receive_notification(listener: RawFd) -> std::io::Result<Notification> {
    // SAFETY: the kernel requires a zeroed seccomp_notif and fills it in.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: `notif` is a valid, writable seccomp_notif for this ioctl.
    if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut notif) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Notification { id: notif.id, pid: notif.pid, syscall: notif.data.nr as i64 })
}

/// Answer a notification with `EPERM` (the call is not executed).
pub fn deny_notification(listener: RawFd, id: u64) -> std::io::Result<()> {
    let resp = libc::seccomp_notif_resp { id, val: 0, error: -libc::EPERM, flags: 0 };
    // SAFETY: `resp` is a valid seccomp_notif_resp; the kernel only reads it.
    if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dangerous_calls_are_never_allowed() {
        for name in ["SYS_ptrace", "SYS_bpf", "SYS_keyctl", "SYS_mount", "SYS_unshare", "SYS_setns",
            "SYS_io_uring_setup", "SYS_userfaultfd", "SYS_perf_event_open"] {
            let entry = SYSCALLS.iter().find(|(n, _, _)| *n == name).expect(name);
            assert_eq!(entry.2, Violation, "{name}");
        }
    }

    #[test]
    fn each_syscall_appears_once() {
        let mut seen = std::collections::HashSet::new();
        for (name, nr, _) in SYSCALLS {
            assert!(seen.insert(nr), "{name} listed twice");
        }
    }

    #[test]
    fn names_resolve_for_reports() {
        assert_eq!(syscall_name(libc::SYS_ptrace), Some("ptrace"));
        assert_eq!(syscall_name(libc::SYS_execve), Some("execve"));
        assert_eq!(syscall_name(100_000), None);
    }

    #[test]
    fn profiles_compile_to_different_programs() {
        let closed = SeccompFilters::build(SeccompProfile { exec: false, network: false }).unwrap();
        let open = SeccompFilters::build(SeccompProfile { exec: true, network: true }).unwrap();
        assert_eq!(closed.programs.len(), 3);
        assert_eq!(open.programs.len(), 2, "no socket filter when the network is on");
        assert!(closed.instruction_count() > 100);
    }

    #[test]
    fn notify_patch_rewrites_only_trap_returns() {
        let f = SeccompFilters::build(SeccompProfile { exec: false, network: false }).unwrap();
        let patched = notify_instead_of_trap(&f.violations);
        let count = |p: &BpfProgram, k: u32| p.iter().filter(|i| i.code == 0x06 && i.k == k).count();
        assert!(count(&f.violations, 0x0003_0000) > 0);
        assert_eq!(count(&patched, 0x0003_0000), 0);
        assert_eq!(count(&patched, libc::SECCOMP_RET_USER_NOTIF), count(&f.violations, 0x0003_0000));
        assert_eq!(patched.len(), f.violations.len());
    }
}
