//! Run any program under a policy: fork, lock the child down, `execve`.
//!
//! Failures in the child (a layer that cannot be applied, a program that cannot be
//! executed) travel back over a close-on-exec pipe, so the caller gets the real error
//! instead of an anonymous exit status: the pipe reads empty exactly when `execve` worked.
//!
//! The program may execute itself only, and only once. Landlock's execute right alone
//! would not hold it to that: the right must cover the program's ELF interpreter, and
//! the interpreter runs any readable program named on its command line. So seccomp
//! treats every `execve` as a violation reported to the caller, and the caller lets
//! exactly one through: the launcher's own, checked by pid and number, made by our code
//! before anything of the program has run. Any later exec (the interpreter trick, a
//! memfd, a shell) reaches the caller as a violation, in [`Spawned::violations`].

use crate::namespaces::PinnedNamespaces;
use crate::root_template::RootTemplate;
use crate::seccomp::{self, SeccompProfile};
use crate::{apply_before_exec, Policy, SeccompFilters};
use std::ffi::CString;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use thiserror::Error;

/// Why a sandboxed program could not be started.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// Bad arguments (a NUL byte, an invalid policy).
    #[error("invalid command: {0}")]
    Invalid(String),
    /// `pipe2` or `fork` failed in the parent.
    #[error("failed to {call}")]
    Parent {
        /// The system call.
        call: &'static str,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// The child reported an error before `execve` succeeded.
    #[error("{0}")]
    Child(String),
    /// The caller runs other threads: a forked copy of one thread may find a lock
    /// (malloc's, say) held forever by a thread that does not exist in it.
    #[error("spawn needs a single-threaded caller; this process runs {threads} threads")]
    Threads {
        /// Threads of the calling process.
        threads: usize,
    },
}

/// Threads of this process, from `/proc/self/stat` (field 20).
pub fn thread_count() -> io::Result<usize> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
    after
        .split_whitespace()
        .nth(17)
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unexpected /proc/self/stat"))
}

/// fd number the child's error pipe is moved to.
const ERROR_FD: RawFd = 3;
/// fd number the child's end of the violation socket is moved to; the policy keeps fds
/// below it + 1. Both are close-on-exec: the program inherits neither.
const VIOLATION_FD: RawFd = 4;

/// A program started under a policy.
#[derive(Debug)]
pub struct Spawned {
    /// Its pid (also its process group); the caller waits for it.
    pub pid: libc::pid_t,
    /// The seccomp listener: every notification on it is a violation (the one allowed
    /// exec has been let through already). Read it with
    /// [`seccomp::receive_notification`]; once it is closed, a forbidden call fails
    /// with `ENOSYS` instead of being reported.
    pub violations: OwnedFd,
}

/// Start `program` with `args` (argv[0] included) and `env` under `policy`, inheriting
/// fds 0-2. Returns the child's pid and its violation listener; the caller waits for it
/// and watches the listener. With `shared`, the child joins those empty network, IPC
/// and UTS namespaces instead of making its own (as root; see [`PinnedNamespaces`]);
/// with `root`, it copies that template's private root instead of building its own
/// (see [`RootTemplate::open_or_pin`]), when the template fits the policy.
///
/// Refused ([`SpawnError::Threads`]) unless the caller is single-threaded: the child
/// allocates before `execve`, which is only sound when no other thread can hold a lock.
pub fn spawn(
    policy: &Policy,
    program: &Path,
    args: &[String],
    env: &[(String, String)],
    shared: Option<&PinnedNamespaces>,
    root: Option<&RootTemplate>,
) -> Result<Spawned, SpawnError> {
    let invalid = |e: &dyn std::fmt::Display| SpawnError::Invalid(e.to_string());
    match thread_count() {
        Ok(1) => {}
        Ok(threads) => return Err(SpawnError::Threads { threads }),
        Err(source) => {
            return Err(SpawnError::Parent { call: "count this process's threads (/proc/self/stat)", source })
        }
    }
    let mut policy = policy.clone();
    policy.keep_fds_below = VIOLATION_FD + 1;
    policy.violation_fd = Some(VIOLATION_FD);
    policy.validate().map_err(|e| invalid(&e))?;
    // exec is a violation for seccomp; the launcher's one exec is let through below.
    let filters = SeccompFilters::build(SeccompProfile { exec: false, observe: false, ..policy.seccomp_profile() })
        .map_err(|e| invalid(&e))?;
    let (reports, reports_child) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| SpawnError::Parent { call: "create the violation socket (socketpair)", source: e.into() })?;
    let c_program = CString::new(program.as_os_str().as_bytes()).map_err(|e| invalid(&e))?;
    let c_args =
        args.iter().map(|a| CString::new(a.as_bytes())).collect::<Result<Vec<_>, _>>().map_err(|e| invalid(&e))?;
    let c_env = env
        .iter()
        .map(|(k, v)| CString::new(format!("{k}={v}")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(&e))?;
    let mut argv: Vec<*const libc::c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = c_env.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());

    // The child moves its two fds to 3 and 4 first: a template held there would be
    // closed by the move, so it is not used (the child builds its root itself).
    let root = root.filter(|t| t.fds().iter().all(|&fd| fd > VIOLATION_FD));
    let mut pipe = [0; 2];
    // SAFETY: `pipe` has room for the two fds the kernel writes.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(SpawnError::Parent { call: "create the error pipe (pipe2)", source: io::Error::last_os_error() });
    }
    // SAFETY: getpid cannot fail.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the caller guarantees a single-threaded process, so the child may allocate
    // and run ordinary Rust code until it calls execve or _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: plain fd operations on fds this process owns.
        let moved = unsafe { libc::dup2(pipe[1], ERROR_FD) } == ERROR_FD
            // SAFETY: as above.
            && unsafe { libc::fcntl(ERROR_FD, libc::F_SETFD, libc::FD_CLOEXEC) } == 0
            // SAFETY: as above.
            && unsafe { libc::dup2(reports_child.as_raw_fd(), VIOLATION_FD) } == VIOLATION_FD
            // SAFETY: as above.
            && unsafe { libc::fcntl(VIOLATION_FD, libc::F_SETFD, libc::FD_CLOEXEC) } == 0;
        let joined = shared.map_or(Ok(()), PinnedNamespaces::join);
        let message = if !moved {
            format!("failed to move the error pipe: {}", io::Error::last_os_error())
        } else if let Err(e) = joined {
            format!("failed to lock the sandbox down: {}", error_chain(&e))
        } else {
            match apply_before_exec(&policy, &filters, parent, root) {
                // SAFETY: argv and envp are NULL-terminated arrays of valid C strings that
                // outlive the call; execve only returns on failure.
                Ok(_) => unsafe {
                    libc::execve(c_program.as_ptr(), argv.as_ptr(), envp.as_ptr());
                    format!("failed to execute {} (execve): {}", program.display(), io::Error::last_os_error())
                },
                Err(e) => format!("failed to lock the sandbox down: {}", error_chain(&e)),
            }
        };
        // Whether or not the message gets out, the exit status reports failure.
        match crate::sys::write_all_raw(ERROR_FD, message.as_bytes()) {
            Ok(()) | Err(_) => crate::sys::exit_immediately(127),
        }
    }
    // SAFETY: closing our copy of the write end; the child holds its own.
    unsafe { libc::close(pipe[1]) };
    drop(reports_child);
    if pid < 0 {
        // SAFETY: closing the read end we own.
        unsafe { libc::close(pipe[0]) };
        return Err(SpawnError::Parent { call: "fork", source: io::Error::last_os_error() });
    }
    // SAFETY: pipe[0] is an fd we own and nothing else will close it.
    let reader = unsafe { std::fs::File::from_raw_fd(pipe[0]) };
    let outcome = let_the_launcher_exec(pid, &reports, reader);
    if outcome.is_err() {
        // SAFETY: killing and reaping our own child, which failed or was refused.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
    outcome.map(|violations| Spawned { pid, violations })
}

/// Receive the child's seccomp listener, let its one `execve` through, and read the
/// error pipe to its end (empty: the program runs). Anything else from the child is an
/// error, and the child is killed by the caller.
fn let_the_launcher_exec(
    pid: libc::pid_t,
    reports: &OwnedFd,
    mut errors: std::fs::File,
) -> Result<OwnedFd, SpawnError> {
    let failed = |what: &str| SpawnError::Child(what.to_string());
    let mut byte = [0u8; 1];
    let listener = match crate::fdpass::recv(reports.as_fd(), &mut byte) {
        Ok((_, mut fds)) if fds.len() == 1 => fds.pop().expect("one fd"),
        // No listener: the lockdown failed before seccomp; the pipe says why.
        Ok(_) => {
            let mut report = String::new();
            errors
                .read_to_string(&mut report)
                .map_err(|source| SpawnError::Parent { call: "read the error pipe", source })?;
            return Err(SpawnError::Child(if report.is_empty() {
                "the sandbox sent no seccomp listener".into()
            } else {
                report
            }));
        }
        Err(source) => return Err(SpawnError::Parent { call: "receive the seccomp listener", source }),
    };
    // The exec notification, unless the child died first (then the pipe says why).
    let mut fds = [
        libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: errors.as_raw_fd(), events: libc::POLLIN, revents: 0 },
    ];
    // SAFETY: two valid pollfds; 20 s is far beyond any lockdown.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, 20_000) };
    if ready <= 0 || fds[0].revents & libc::POLLIN == 0 {
        let mut report = String::new();
        if fds[1].revents != 0 {
            errors
                .read_to_string(&mut report)
                .map_err(|source| SpawnError::Parent { call: "read the error pipe", source })?;
        }
        return Err(SpawnError::Child(if report.is_empty() {
            "the sandbox never reached its exec".into()
        } else {
            report
        }));
    }
    let notification = seccomp::receive_notification(listener.as_raw_fd())
        .map_err(|source| SpawnError::Parent { call: "receive the launcher's exec notification", source })?;
    let is_launch = notification.pid == pid as u32
        && (notification.syscall == libc::SYS_execve || notification.syscall == libc::SYS_execveat);
    if !is_launch {
        return Err(failed(&format!(
            "the sandbox made system call {} before its program started",
            seccomp::syscall_name(notification.syscall).unwrap_or("?")
        )));
    }
    seccomp::continue_notification(listener.as_raw_fd(), notification.id)
        .map_err(|source| SpawnError::Parent { call: "let the launcher's exec through", source })?;
    let mut report = String::new();
    errors.read_to_string(&mut report).map_err(|source| SpawnError::Parent { call: "read the error pipe", source })?;
    if report.is_empty() {
        Ok(listener)
    } else {
        Err(SpawnError::Child(report))
    }
}

/// An error and its sources on one line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_threaded_caller_is_refused() {
        // The test harness runs this on a thread of its own: the process has several.
        let threads = thread_count().unwrap();
        assert!(threads > 1, "{threads}");
        let err = spawn(&Policy::default(), Path::new("/bin/true"), &["true".into()], &[], None, None).unwrap_err();
        assert!(matches!(err, SpawnError::Threads { threads: n } if n > 1), "{err}");
    }
}
