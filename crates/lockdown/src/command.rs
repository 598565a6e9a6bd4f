//! Run any program under a policy: start a child in our memory (see `ChildStack`), lock
//! it down, `execve`.
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
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
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
    /// `pipe2`, `mmap` or `clone` failed in the parent.
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
    /// The caller runs other threads: they would run beside the child in the memory it
    /// shares, taking the locks (malloc's, say) and changing the data it uses.
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
/// runs in the caller's memory and allocates before `execve`, which is only sound when
/// no other thread can hold a lock or touch that memory meanwhile.
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
    // exec is a violation for seccomp; the launcher's one exec is let through below. An
    // internet socket is refused in the kernel (`exec`'s watch knows only violations).
    let profile = SeccompProfile { exec: false, observe: false, report_network: false, ..policy.seccomp_profile() };
    let filters = SeccompFilters::build(profile).map_err(|e| invalid(&e))?;
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

    // The child moves its two fds to 3 and 4 first: a template or pinned namespaces held
    // there would be closed by the move, so they are not used (the child builds its root
    // and makes its namespaces itself, the same layers).
    let root = root.filter(|t| t.fds().iter().all(|&fd| fd > VIOLATION_FD));
    let shared = shared.filter(|s| s.fds().all(|fd| fd > VIOLATION_FD));
    let mut pipe = [0; 2];
    // SAFETY: `pipe` has room for the two fds the kernel writes.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(SpawnError::Parent { call: "create the error pipe (pipe2)", source: io::Error::last_os_error() });
    }
    let [errors, errors_child] = pipe;
    let reports_child_fd = reports_child.as_raw_fd();
    // SAFETY: getpid cannot fail.
    let parent = unsafe { libc::getpid() };
    let (policy, filters) = (&policy, &filters);
    // What the child runs, in our memory (see `ChildStack`): it borrows what it reads,
    // so nothing of it can be changed or freed here while it lives.
    let child = move || {
        // SAFETY: plain fd operations on fds this process owns.
        let moved = unsafe { libc::dup2(errors_child, ERROR_FD) } == ERROR_FD
            // SAFETY: as above.
            && unsafe { libc::fcntl(ERROR_FD, libc::F_SETFD, libc::FD_CLOEXEC) } == 0
            // SAFETY: as above.
            && unsafe { libc::dup2(reports_child_fd, VIOLATION_FD) } == VIOLATION_FD
            // SAFETY: as above.
            && unsafe { libc::fcntl(VIOLATION_FD, libc::F_SETFD, libc::FD_CLOEXEC) } == 0;
        let joined = shared.map_or(Ok(()), PinnedNamespaces::join);
        let message = if !moved {
            format!("failed to move the error pipe: {}", io::Error::last_os_error())
        } else if let Err(e) = joined {
            format!("failed to lock the sandbox down: {}", error_chain(&e))
        } else {
            match apply_before_exec(policy, filters, parent, root, shared.is_some()) {
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
    };
    // The child's identity switch and its own non-dumpable step set the flag of the
    // memory it shares with us: ours is put back once the child is out of it.
    let dumpable = rustix::process::dumpable_behavior();
    let stack = match ChildStack::map() {
        Ok(stack) => stack,
        Err(source) => {
            // SAFETY: closing the two ends we own; no child holds them.
            unsafe { (libc::close(errors), libc::close(errors_child)) };
            return Err(SpawnError::Parent { call: "map the child's stack (mmap)", source });
        }
    };
    // SAFETY: the caller guarantees a single-threaded process, so no other thread of
    // ours runs beside the child; `child` and `stack` outlive the child's use of them
    // (both are dropped below, after `await_launch`); and until then this thread
    // follows `ChildStack`'s rule. Without CLONE_FILES, CLONE_FS and CLONE_SIGHAND the
    // child has its own fd table, root, working directory and signal handlers.
    let pid = unsafe {
        libc::clone(entry_of(&child), stack.top(), libc::CLONE_VM | libc::SIGCHLD, (&raw const child).cast_mut().cast())
    };
    let cloned = io::Error::last_os_error();
    // Our copies of the child's ends: it holds its own, and the parent sees the child
    // end (or exec) as the end of both.
    // SAFETY: closing the write end we own.
    unsafe { libc::close(errors_child) };
    drop(reports_child);
    // SAFETY: `errors` is an fd we own and nothing else will close it.
    let errors = unsafe { OwnedFd::from_raw_fd(errors) };
    if pid < 0 {
        return Err(SpawnError::Parent { call: "start the child (clone)", source: cloned });
    }
    let launch = await_launch(pid, &reports, &errors);
    if !matches!(launch, Launch::Started(_)) {
        // SAFETY: killing and reaping our own child, which failed or was refused.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
    // The child has exec'd (into memory of its own) or is gone: our memory is ours again.
    drop(stack);
    // The child's borrows (the closure's) last until here.
    drop(child);
    if let Ok(dumpable) = dumpable {
        // Only this process's own dumpability: left non-dumpable (the safer way) if the
        // kernel refuses, which it does not for a value the process had.
        rustix::process::set_dumpable_behavior(dumpable).ok();
    }
    launch.into_result(std::fs::File::from(errors)).map(|violations| Spawned { pid, violations })
}

/// The child's stack while it runs in the parent's memory (`CLONE_VM`): no page tables
/// are copied at the clone, neither side copies a page it writes, and the child's exec
/// drops the shared memory instead of tearing down a copy of it (an `rsandbox exec`
/// took 0.87-0.88 of the forked build's time on a 2-core VM). The rule that buys: from the
/// clone until the child has exec'd or is gone ([`await_launch`]), the parent allocates
/// nothing and changes nothing the child reads (the borrows of the child's closure see
/// to the second), and the child touches nothing of the parent's but what it borrows
/// and the allocator, which the parent leaves alone meanwhile: no static of the
/// lockdown's is written on its way (one was: `PinnedNamespaces::join`'s flag, which
/// would have told a later child of the parent that it was in namespaces it was not).
/// Both share one thread-local block, errno in it: while the child locks itself down
/// the parent waits in `recvmsg` (rustix's, which sets no errno), and its libc calls
/// come after the listener, once the child's decisions are made (at worst the words of
/// a failed `execve` could mix). Mapped lazily, as large
/// as a main thread's stack, its lowest page a guard.
struct ChildStack {
    base: *mut std::ffi::c_void,
}

/// Bytes of [`ChildStack`], guard page included.
const CHILD_STACK: usize = 8 << 20;

impl ChildStack {
    fn map() -> io::Result<ChildStack> {
        use rustix::mm::{MapFlags, ProtFlags};
        let flags = MapFlags::PRIVATE | MapFlags::STACK | MapFlags::NORESERVE;
        // SAFETY: a fresh anonymous mapping at an address of the kernel's choosing
        // aliases nothing.
        let base = unsafe {
            rustix::mm::mmap_anonymous(std::ptr::null_mut(), CHILD_STACK, ProtFlags::READ | ProtFlags::WRITE, flags)
        }?;
        let stack = ChildStack { base };
        // SAFETY: the lowest page of the mapping just made, which nothing uses yet.
        unsafe { rustix::mm::mprotect(base, rustix::param::page_size(), rustix::mm::MprotectFlags::empty()) }?;
        Ok(stack)
    }

    /// Where the stack starts (it grows down).
    fn top(&self) -> *mut std::ffi::c_void {
        // SAFETY: one past the end of the mapping, as a stack pointer must be.
        unsafe { self.base.cast::<u8>().add(CHILD_STACK).cast() }
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: our mapping, which no child runs on any more (see `spawn`). A refusal
        // (none is expected for a whole mapping of ours) would leave 8 MiB of address
        // space mapped, nothing the sandbox could reach: a drop has no caller to tell.
        unsafe { rustix::mm::munmap(self.base, CHILD_STACK) }.ok();
    }
}

/// The entry the cloned child starts at, for a closure of type `F`.
/// (The closure ends in `execve` or `_exit`; the entry never returns either way.)
fn entry_of<F: Fn()>(_: &F) -> extern "C" fn(*mut std::ffi::c_void) -> libc::c_int {
    extern "C" fn run<F: Fn()>(child: *mut std::ffi::c_void) -> libc::c_int {
        // SAFETY: `spawn` passes a pointer to its `F`, alive until the child is done.
        let child = unsafe { &*child.cast_const().cast::<F>() };
        child();
        crate::sys::exit_immediately(127)
    }
    run::<F>
}

/// How far the child got, as [`await_launch`] saw it: plain values, nothing allocated.
enum Launch {
    /// Its one exec was let through and worked: the violation listener.
    Started(OwnedFd),
    /// No listener came: the child ended before seccomp (the error pipe says why).
    NoListener,
    /// Its exec was let through and failed: the first byte of what the error pipe says.
    ExecFailed(u8),
    /// The child never made its exec: it ended first (the pipe says why), or 20 s passed.
    NeverExecuted,
    /// The child's first reported call was not its exec.
    OtherCall(i64),
    /// A call of ours failed.
    Failed { call: &'static str, source: io::Error },
}

/// Receive the child's seccomp listener, let its one `execve` through, and see the
/// error pipe close at that exec. The child still runs in our memory meanwhile: this
/// allocates nothing (see [`ChildStack`]).
fn await_launch(pid: libc::pid_t, reports: &OwnedFd, errors: &OwnedFd) -> Launch {
    let mut byte = [0u8; 1];
    let listener = match crate::fdpass::recv_one(reports, &mut byte) {
        Ok((_, Some(listener))) => listener,
        Ok((_, None)) => return Launch::NoListener,
        Err(source) => return Launch::Failed { call: "receive the seccomp listener", source },
    };
    if let Err(source) = seccomp::prefer_sync_wakeups(listener.as_raw_fd()) {
        return Launch::Failed { call: "ask for synchronous wake-ups on the seccomp listener", source };
    }
    // The exec notification, unless the child died first (then the pipe says why).
    let mut fds = [
        libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: errors.as_raw_fd(), events: libc::POLLIN, revents: 0 },
    ];
    // SAFETY: two valid pollfds; 20 s is far beyond any lockdown.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, 20_000) };
    if ready <= 0 || fds[0].revents & libc::POLLIN == 0 {
        return Launch::NeverExecuted;
    }
    let notification = match seccomp::receive_notification(listener.as_raw_fd()) {
        Ok(notification) => notification,
        Err(source) => return Launch::Failed { call: "receive the launcher's exec notification", source },
    };
    let is_launch = notification.pid == pid as u32
        && (notification.syscall == libc::SYS_execve || notification.syscall == libc::SYS_execveat);
    if !is_launch {
        return Launch::OtherCall(notification.syscall);
    }
    if let Err(source) = seccomp::continue_notification(listener.as_raw_fd(), notification.id) {
        return Launch::Failed { call: "let the launcher's exec through", source };
    }
    // Empty at the exec (the pipe is close-on-exec); a message if the exec failed.
    let mut first = [0u8; 1];
    loop {
        return match rustix::io::read(errors, &mut first) {
            Ok(0) => Launch::Started(listener),
            Ok(_) => Launch::ExecFailed(first[0]),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => Launch::Failed { call: "read the error pipe", source: e.into() },
        };
    }
}

impl Launch {
    /// The launch as `spawn` returns it, once the child has exec'd or been reaped (so
    /// allocating is safe again); `errors` is the error pipe, read for the child's words.
    fn into_result(self, mut errors: std::fs::File) -> Result<OwnedFd, SpawnError> {
        // The child's words, after the bytes of them read already; `default` if none.
        let mut said = |already: &[u8], default: &str| {
            let mut report = already.to_vec();
            match errors.read_to_end(&mut report) {
                Ok(_) if report.is_empty() => SpawnError::Child(default.into()),
                Ok(_) => SpawnError::Child(String::from_utf8_lossy(&report).into()),
                Err(source) => SpawnError::Parent { call: "read the error pipe", source },
            }
        };
        Err(match self {
            Launch::Started(listener) => return Ok(listener),
            Launch::NoListener => said(&[], "the sandbox sent no seccomp listener"),
            Launch::NeverExecuted => said(&[], "the sandbox never reached its exec"),
            Launch::ExecFailed(first) => said(&[first], ""),
            Launch::OtherCall(syscall) => SpawnError::Child(format!(
                "the sandbox made system call {} before its program started",
                seccomp::syscall_name(syscall).unwrap_or("?")
            )),
            Launch::Failed { call, source } => SpawnError::Parent { call, source },
        })
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
