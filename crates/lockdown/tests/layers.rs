//! Every lockdown layer against the real kernel, on its own and together through
//! [`lockdown::apply`], each in a forked child so that nothing irreversible touches the
//! test process.
//!
//! Every scenario runs twice (see [`both_callers!`]): as root, with the policy's `run_as`
//! naming an unprivileged identity, and as an ordinary user, which the child becomes
//! before the lockdown starts. Each test asserts one exact errno or one exact signal.
//!
//! The kernel is declared, not detected: Linux with Landlock ABI ≥ 6, seccomp with user
//! notification, unprivileged user namespaces, and the tests run as root. A kernel that
//! lacks any of it fails the tests instead of skipping them.
#![allow(clippy::undocumented_unsafe_blocks)]

use lockdown::command::error_chain;
use lockdown::errors::{LockdownError, PolicyError, PrivilegeError, ProcessError};
use lockdown::root_template::{RootTemplate, RootTemplates};
use lockdown::{namespaces, privileges, process, rlimits, ruleset, seccomp};
use lockdown::{Applied, Identity, LandlockEnforcement, Limits, Policy, SeccompFilters, SeccompProfile};
use std::fmt::Debug;
use std::fs;
use std::io::{self, Write};
use std::net::{SocketAddr as TcpAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener, UnixStream};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
/// The identity root drops to (`Policy::run_as`).
const RUN_AS: Identity = Identity { uid: 2_000_100_000, gid: 2_000_100_000 };
/// The ordinary user the non-root scenarios run as.
const USER: Identity = Identity { uid: 2_000_200_000, gid: 2_000_200_000 };
/// From <linux/securebits.h>: NOROOT, NO_SETUID_FIXUP, their locks, KEEP_CAPS_LOCKED,
/// NO_CAP_AMBIENT_RAISE and its lock.
const LOCKED_SECUREBITS: libc::c_int = 0b1110_1111;
/// A child that has not finished by then is killed and the test fails.
const CHILD_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------
// Who runs the lockdown
// ---------------------------------------------------------------------------------------

/// The identity the child has when the lockdown starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Caller {
    /// The child stays root; the policy names [`RUN_AS`].
    Root,
    /// The child first becomes [`USER`], as if an ordinary user had started the sandbox.
    User,
}

impl Caller {
    fn is_root(self) -> bool {
        self == Caller::Root
    }

    /// The identity the sandboxed process ends up with (and owns the workspace).
    fn sandbox_identity(self) -> Identity {
        match self {
            Caller::Root => RUN_AS,
            Caller::User => USER,
        }
    }

    /// `Policy::run_as` for this caller.
    fn run_as(self) -> Option<Identity> {
        match self {
            Caller::Root => Some(RUN_AS),
            Caller::User => None,
        }
    }

    /// The namespaces `enter_namespaces` creates for this caller.
    fn namespaces(self) -> Vec<&'static str> {
        match self {
            Caller::Root => vec!["net", "ipc", "uts"],
            Caller::User => vec!["user", "net", "ipc", "uts"],
        }
    }

    /// In the child, before anything else: become this caller.
    fn assume(self) -> Check {
        if self == Caller::Root {
            return Ok(());
        }
        let id = USER;
        expect_ok("setgroups([])", unsafe { libc::setgroups(0, std::ptr::null()) }.into())?;
        expect_ok("setresgid", unsafe { libc::setresgid(id.gid, id.gid, id.gid) }.into())?;
        expect_ok("setresuid", unsafe { libc::setresuid(id.uid, id.uid, id.uid) }.into())?;
        // Changing uid made us non-dumpable (fs.suid_dumpable = 0). A process an ordinary
        // user starts is dumpable, so restore that to run exactly as such a process would.
        expect_ok("prctl(PR_SET_DUMPABLE, 1)", unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) }.into())?;
        check_eq("ids after becoming the user", ids()?, ([id.uid; 3], [id.gid; 3]))?;
        check_eq("capabilities of the user", capabilities()?, (0, 0))
    }
}

/// Run each named scenario `fn name(Caller)` as two tests, `name::as_root` and
/// `name::as_user`.
macro_rules! both_callers {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn as_root() {
                    super::$name(super::Caller::Root)
                }
                #[test]
                fn as_user() {
                    super::$name(super::Caller::User)
                }
            }
        )*
    };
}

// ---------------------------------------------------------------------------------------
// Forked children
// ---------------------------------------------------------------------------------------

/// What the child's closure returns: `Err` carries what went wrong, in words.
type Check = Result<(), String>;

/// How a child ended.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// The closure returned `Ok` (or the child exec'd a program that exited 0).
    Passed,
    /// The closure returned this error or panicked with it.
    Failed(String),
    /// Exited with this non-zero status without reporting an error.
    Exited(i32),
    /// Killed by this signal.
    Signaled(i32),
    /// Still running after [`CHILD_TIMEOUT`] (then killed).
    TimedOut,
}

/// One shared anonymous page through which the child reports its error. Unlike a pipe it
/// needs no fd, so it survives `close_range`, `RLIMIT_NOFILE`, Landlock and seccomp, and
/// writing to it makes no system call.
struct SharedReport {
    base: *mut u8,
}

const REPORT_BYTES: usize = 4096;

impl SharedReport {
    fn new() -> Self {
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                REPORT_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED, "mmap of the report page: {}", io::Error::last_os_error());
        SharedReport { base: base.cast() }
    }

    /// Layout: a u32 holding length + 1 (0: nothing reported), then the text.
    fn write(&self, text: &str) {
        let bytes = &text.as_bytes()[..text.len().min(REPORT_BYTES - 4)];
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(4), bytes.len());
            self.base.cast::<u32>().write_volatile(bytes.len() as u32 + 1);
        }
    }

    fn read(&self) -> Option<String> {
        let marked = unsafe { self.base.cast::<u32>().read_volatile() } as usize;
        let len = marked.checked_sub(1)?;
        let bytes = unsafe { std::slice::from_raw_parts(self.base.add(4), len) };
        Some(String::from_utf8_lossy(bytes).into_owned())
    }
}

impl Drop for SharedReport {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base.cast(), REPORT_BYTES) };
    }
}

/// A forked child; dropping it unwaited kills it.
struct Child {
    pid: libc::pid_t,
    report: SharedReport,
    reaped: bool,
}

/// Fork; in the child become `caller`, run `body`, report its error and `_exit`.
///
/// The harness runs tests on several threads, so the child of `fork` may only rely on
/// what survives it: glibc's malloc is fork-safe, and the child neither prints nor takes
/// std locks; its report goes into shared memory, not through a file descriptor.
fn spawn(caller: Caller, body: impl FnOnce() -> Check) -> Child {
    assert_eq!(unsafe { libc::geteuid() }, 0, "tests/layers.rs runs as root (it needs to become other users)");
    let report = SharedReport::new();
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
    if pid == 0 {
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| caller.assume().and_then(|()| body())));
        let code = match result {
            Ok(Ok(())) => 0,
            Ok(Err(message)) => {
                report.write(&message);
                1
            }
            Err(panic) => {
                let text = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown payload".into());
                report.write(&format!("child panicked: {text}"));
                2
            }
        };
        unsafe { libc::_exit(code) }
    }
    Child { pid, report, reaped: false }
}

impl Child {
    fn wait(mut self) -> Outcome {
        let deadline = Instant::now() + CHILD_TIMEOUT;
        let mut status = 0;
        loop {
            let rc = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
            if rc == self.pid {
                break;
            }
            assert!(rc == 0 || errno() == libc::EINTR, "waitpid: {}", io::Error::last_os_error());
            if Instant::now() > deadline {
                unsafe { libc::kill(self.pid, libc::SIGKILL) };
                unsafe { libc::waitpid(self.pid, &mut status, 0) };
                self.reaped = true;
                return Outcome::TimedOut;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.reaped = true;
        if let Some(message) = self.report.read() {
            Outcome::Failed(message)
        } else if libc::WIFEXITED(status) {
            match libc::WEXITSTATUS(status) {
                0 => Outcome::Passed,
                code => Outcome::Exited(code),
            }
        } else if libc::WIFSIGNALED(status) {
            Outcome::Signaled(libc::WTERMSIG(status))
        } else {
            panic!("unexpected wait status {status:#x}")
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.reaped {
            let mut status = 0;
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            unsafe { libc::waitpid(self.pid, &mut status, 0) };
        }
    }
}

/// Fork, run `body` as `caller` in the child, and say how the child ended.
fn run(caller: Caller, body: impl FnOnce() -> Check) -> Outcome {
    spawn(caller, body).wait()
}

// ---------------------------------------------------------------------------------------
// Checks inside the child
// ---------------------------------------------------------------------------------------

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn errno_name(e: i32) -> String {
    format!("{} (errno {e})", io::Error::from_raw_os_error(e))
}

/// A raw call (`-1` + errno on failure) must fail with exactly `want`.
fn expect_errno(what: &str, rc: i64, want: i32) -> Check {
    let got = errno();
    match rc {
        -1 if got == want => Ok(()),
        -1 => Err(format!("{what}: failed with {} instead of {}", errno_name(got), errno_name(want))),
        _ => Err(format!("{what}: returned {rc} instead of failing with {}", errno_name(want))),
    }
}

/// A raw call must succeed; returns its value.
fn expect_ok(what: &str, rc: i64) -> Result<i64, String> {
    if rc == -1 {
        Err(format!("{what}: {}", errno_name(errno())))
    } else {
        Ok(rc)
    }
}

/// A std call must fail with exactly `want`.
fn expect_io_errno<T: Debug>(what: &str, result: io::Result<T>, want: i32) -> Check {
    match result {
        Err(e) if e.raw_os_error() == Some(want) => Ok(()),
        Err(e) => Err(format!("{what}: failed with {e} instead of {}", errno_name(want))),
        Ok(v) => Err(format!("{what}: succeeded ({v:?}) instead of failing with {}", errno_name(want))),
    }
}

/// A std call must succeed.
fn io_ok<T>(what: &str, result: io::Result<T>) -> Result<T, String> {
    result.map_err(|e| format!("{what}: {e}"))
}

fn check_eq<T: PartialEq + Debug>(what: &str, got: T, want: T) -> Check {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, expected {want:?}"))
    }
}

/// A lockdown step must succeed; its error chain otherwise.
fn step<T, E: std::error::Error>(what: &str, result: Result<T, E>) -> Result<T, String> {
    result.map_err(|e| format!("{what}: {}", error_chain(&e)))
}

/// (ruid, euid, suid), (rgid, egid, sgid).
fn ids() -> Result<([u32; 3], [u32; 3]), String> {
    let (mut u, mut g) = ([0u32; 3], [0u32; 3]);
    expect_ok("getresuid", unsafe { libc::getresuid(&mut u[0], &mut u[1], &mut u[2]) }.into())?;
    expect_ok("getresgid", unsafe { libc::getresgid(&mut g[0], &mut g[1], &mut g[2]) }.into())?;
    Ok((u, g))
}

/// `capget`: (effective, permitted).
fn capabilities() -> Result<(u64, u64), String> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header { version: 0x2008_0522, pid: 0 };
    let mut data = [Data::default(); 2];
    expect_ok("capget", unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) })?;
    let join = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
    Ok((join(data[0].effective, data[1].effective), join(data[0].permitted, data[1].permitted)))
}

fn prctl_get(what: &str, option: libc::c_int) -> Result<i64, String> {
    expect_ok(what, unsafe { libc::prctl(option, 0, 0, 0, 0) }.into())
}

fn getpid() -> libc::pid_t {
    unsafe { libc::getpid() }
}

/// The namespace a `/proc/self/ns` link points to, e.g. `net:[4026531840]`.
fn namespace_of(kind: &str) -> Result<PathBuf, String> {
    io_ok(kind, fs::read_link(format!("/proc/self/ns/{kind}")))
}

// ---------------------------------------------------------------------------------------
// Fixtures in the parent
// ---------------------------------------------------------------------------------------

static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

fn unique_name(prefix: &str) -> String {
    format!("{prefix}-{}-{}", std::process::id(), NEXT_ID.fetch_add(1, Ordering::Relaxed))
}

/// A fresh directory under /tmp owned by the sandbox's identity, removed on drop:
/// `ro/` (holding `ro/data`) is meant for read-only rules, `rw/` for read-write ones.
struct Workspace {
    root: PathBuf,
}

impl Workspace {
    fn new(owner: Identity) -> Self {
        let root = PathBuf::from("/tmp").join(unique_name("lockdown-layers"));
        fs::create_dir(&root).unwrap();
        let workspace = Workspace { root };
        fs::create_dir(workspace.ro()).unwrap();
        fs::create_dir(workspace.rw()).unwrap();
        fs::write(workspace.ro().join("data"), "read-only data\n").unwrap();
        for path in [workspace.root.clone(), workspace.ro(), workspace.rw(), workspace.ro().join("data")] {
            std::os::unix::fs::chown(&path, Some(owner.uid), Some(owner.gid)).unwrap();
        }
        workspace
    }

    fn ro(&self) -> PathBuf {
        self.root.join("ro")
    }

    fn rw(&self) -> PathBuf {
        self.root.join("rw")
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir_all(&self.root) {
            eprintln!("could not remove {}: {e}", self.root.display());
        }
    }
}

/// A TCP listener on 127.0.0.1 in the test's network namespace.
fn tcp_listener() -> (TcpListener, TcpAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

/// A listening abstract unix socket in the test's network namespace.
fn abstract_listener() -> (UnixListener, UnixAddr) {
    let addr = UnixAddr::from_abstract_name(unique_name("lockdown-layers").as_bytes()).unwrap();
    (UnixListener::bind_addr(&addr).unwrap(), addr)
}

/// Receive one fd sent with `SCM_RIGHTS` (and a one-byte message), waiting at most 10 s.
fn receive_fd(socket: &UnixStream) -> io::Result<RawFd> {
    socket.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space;
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    if n == 0 || cmsg.is_null() {
        return Err(io::Error::other("no fd received (the sandbox closed the socket)"));
    }
    let (level, kind) = unsafe { ((*cmsg).cmsg_level, (*cmsg).cmsg_type) };
    assert_eq!((level, kind), (libc::SOL_SOCKET, libc::SCM_RIGHTS));
    Ok(unsafe { libc::CMSG_DATA(cmsg).cast::<RawFd>().read_unaligned() })
}

/// Supervisor side of a notification: wait for one, check it is `unshare` from `pid`,
/// and deny it (the sandbox sees `EPERM`).
fn deny_one_unshare(listener: RawFd, pid: libc::pid_t) {
    let mut poll = libc::pollfd { fd: listener, events: libc::POLLIN, revents: 0 };
    let ready = unsafe { libc::poll(&mut poll, 1, 10_000) };
    assert_eq!(ready, 1, "no seccomp notification within 10 s (revents {:#x})", poll.revents);
    let notification = seccomp::receive_notification(listener).unwrap();
    assert_eq!(notification.syscall, libc::SYS_unshare, "{notification:?}");
    assert_eq!(seccomp::syscall_name(notification.syscall), Some("unshare"));
    assert_eq!(notification.pid, pid as u32, "{notification:?}");
    seccomp::deny_notification(listener, notification.id).unwrap();
}

fn closed_filters() -> SeccompFilters {
    SeccompFilters::build(SeccompProfile {
        exec: false,
        network: false,
        observe: false,
        private_root: false,
        report_network: false,
    })
    .unwrap()
}

fn this_pid() -> libc::pid_t {
    std::process::id() as libc::pid_t
}

// ---------------------------------------------------------------------------------------
// Step 1: process
// ---------------------------------------------------------------------------------------

both_callers!(process_isolation, process_keeps_fds_below_the_limit, process_refuses_a_wrong_parent);

/// Own process group, SIGKILL on parent death, non-dumpable, fds from 3 up closed.
fn process_isolation(caller: Caller) {
    let parent = this_pid();
    let outcome = run(caller, move || {
        let fd = expect_ok("open /dev/null", unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY) }.into())?;
        expect_ok("dup2 to 3", unsafe { libc::dup2(fd as RawFd, 3) }.into())?;
        expect_ok("dup2 to 100", unsafe { libc::dup2(fd as RawFd, 100) }.into())?;
        check_eq("pgrp before (the harness's group)", unsafe { libc::getpgrp() } == getpid(), false)?;

        step("isolate_process", process::isolate_process(3, &[], parent))?;

        for fd in [3, fd as RawFd, 100] {
            let rc = unsafe { libc::fcntl(fd, libc::F_GETFD) };
            expect_errno(&format!("fcntl({fd}, F_GETFD)"), rc.into(), libc::EBADF)?;
        }
        check_eq("getpgrp() == getpid()", unsafe { libc::getpgrp() }, getpid())?;
        let mut signal: libc::c_int = 0;
        expect_ok("PR_GET_PDEATHSIG", unsafe { libc::prctl(libc::PR_GET_PDEATHSIG, &mut signal, 0, 0, 0) }.into())?;
        check_eq("parent-death signal", signal, libc::SIGKILL)
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// `keep_below` is exclusive: fd 4 survives `isolate_process(5, ..)`, fd 5 does not; the
/// fds kept above it (a root template's: 7, and the run 9 to 11) survive until
/// `close_kept_fds`, their neighbours 6, 8 and 12 do not.
fn process_keeps_fds_below_the_limit(caller: Caller) {
    let parent = this_pid();
    let outcome = run(caller, move || {
        let fd = expect_ok("open /dev/null", unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY) }.into())?;
        let all = [4, 5, 6, 7, 8, 9, 10, 11, 12];
        for to in all {
            expect_ok(&format!("dup2 to {to}"), unsafe { libc::dup2(fd as RawFd, to) }.into())?;
        }
        step("isolate_process", process::isolate_process(5, &[10, 7, 9, 11], parent))?;
        let open = |fd: RawFd| unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0;
        check_eq("open among 4..=12", all.map(open), [true, false, false, true, false, true, true, true, false])?;
        step("close_kept_fds", process::close_kept_fds(&[11, 7, 9, 10]))?;
        check_eq(
            "open among 4..=12 after",
            all.map(open),
            [true, false, false, false, false, false, false, false, false],
        )
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// A parent that is not the one expected (ours "died" and we were reparented) is refused.
fn process_refuses_a_wrong_parent(caller: Caller) {
    let outcome = run(caller, || match process::isolate_process(3, &[], 1) {
        Err(ProcessError::ParentGone) => Ok(()),
        other => Err(format!("isolate_process with a wrong parent: {other:?}, expected ParentGone")),
    });
    assert_eq!(outcome, Outcome::Passed);
}

// ---------------------------------------------------------------------------------------
// Step 2: namespaces
// ---------------------------------------------------------------------------------------

both_callers!(namespaces_cut_off_the_host_network);

/// New net, ipc and uts namespaces (and a user namespace without root): the host's
/// 127.0.0.1 and abstract sockets are gone.
fn namespaces_cut_off_the_host_network(caller: Caller) {
    let (_tcp, tcp_addr) = tcp_listener();
    let (_unix, unix_addr) = abstract_listener();
    let host: Vec<PathBuf> = ["user", "net", "ipc", "uts"].iter().map(|k| namespace_of(k).unwrap()).collect();
    let outcome = run(caller, move || {
        let created = step("enter_namespaces", namespaces::enter_namespaces(caller.is_root(), false, false))?;
        check_eq("namespaces created", created, caller.namespaces())?;
        for (kind, host_ns) in ["user", "net", "ipc", "uts"].iter().zip(&host) {
            let new = caller.namespaces().contains(kind);
            check_eq(&format!("{kind} namespace differs from the host's"), &namespace_of(kind)? != host_ns, new)?;
        }
        // The new network namespace's loopback is down: no route at all.
        let tcp = TcpStream::connect(tcp_addr);
        expect_io_errno("TCP connect to the host's 127.0.0.1 listener", tcp, libc::ENETUNREACH)?;
        // Abstract unix sockets belong to the network namespace: nobody listens here.
        let unix = UnixStream::connect_addr(&unix_addr);
        expect_io_errno("connect to the host's abstract socket", unix, libc::ECONNREFUSED)?;
        // The user namespace maps our own ids to themselves.
        let id = caller.sandbox_identity();
        let ours = if caller.is_root() { [0; 3] } else { [id.uid; 3] };
        check_eq("uids inside the namespaces", ids()?.0, ours)
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// Best effort passes over a namespace the kernel refuses, never over a user namespace
/// entered but left without id maps (the process would run as the overflow id): the
/// error names the layer and the option. A non-dumpable process may not write its
/// uid_map, which makes the map fail after `unshare(CLONE_NEWUSER)` succeeded.
#[test]
fn best_effort_never_passes_over_a_user_namespace_without_id_maps() {
    let outcome = run(Caller::User, || {
        expect_ok("prctl(PR_SET_DUMPABLE, 0)", unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) }.into())?;
        match namespaces::enter_namespaces(false, true, false) {
            Ok(created) => Err(format!("best effort entered {created:?} and said nothing of the id maps")),
            Err(e) => {
                let text = error_chain(&e);
                let named = ["namespaces layer", "without id maps", "best_effort"].iter().all(|w| text.contains(w));
                if named {
                    Ok(())
                } else {
                    Err(format!("the error should name the layer and the option: {text}"))
                }
            }
        }
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// Through `apply` too: a best-effort policy fails instead of reporting a sandbox.
#[test]
fn apply_best_effort_fails_on_a_user_namespace_without_id_maps() {
    let policy = Policy { best_effort: true, ..Policy::default() };
    let filters = SeccompFilters::build(policy.seccomp_profile()).unwrap();
    let parent = this_pid();
    let outcome = run(Caller::User, move || {
        expect_ok("prctl(PR_SET_DUMPABLE, 0)", unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) }.into())?;
        match lockdown::apply(&policy, &filters, parent) {
            Ok(applied) => Err(format!("best effort applied {applied:?} without id maps")),
            Err(LockdownError::Namespace(e)) if error_chain(&e).contains("without id maps") => Ok(()),
            Err(e) => Err(format!("another error: {}", error_chain(&e))),
        }
    });
    assert_eq!(outcome, Outcome::Passed);
}

// ---------------------------------------------------------------------------------------
// Step 3: privileges
// ---------------------------------------------------------------------------------------

both_callers!(privileges_are_dropped);

/// Root becomes `run_as`; a user inside its own user namespace (where it holds every
/// capability) loses them all. Either way: no capabilities, an empty bounding set,
/// locked securebits, no_new_privs, and no way back to uid 0.
fn privileges_are_dropped(caller: Caller) {
    let outcome = run(caller, move || {
        if !caller.is_root() {
            step("enter_namespaces", namespaces::enter_namespaces(false, false, false))?;
        }
        let (_, permitted) = capabilities()?;
        check_eq("capabilities before the drop", permitted != 0, true)?;

        step("drop_privileges", privileges::drop_privileges(caller.run_as(), false))?;

        let id = caller.sandbox_identity();
        check_eq("ids", ids()?, ([id.uid; 3], [id.gid; 3]))?;
        check_eq("supplementary groups", unsafe { libc::getgroups(0, std::ptr::null_mut()) }, 0)?;
        check_eq("capabilities (effective, permitted)", capabilities()?, (0, 0))?;
        let mut known = 0;
        while unsafe { libc::prctl(libc::PR_CAPBSET_READ, known, 0, 0, 0) } != -1 {
            let held = unsafe { libc::prctl(libc::PR_CAPBSET_READ, known, 0, 0, 0) };
            check_eq(&format!("capability {known} in the bounding set"), held, 0)?;
            known += 1;
        }
        expect_errno("PR_CAPBSET_READ past the last capability", -1, libc::EINVAL)?;
        // 41: up to CAP_CHECKPOINT_RESTORE (Linux 5.9).
        check_eq("capabilities checked", known >= 41, true)?;
        check_eq("securebits", prctl_get("PR_GET_SECUREBITS", libc::PR_GET_SECUREBITS)?, LOCKED_SECUREBITS.into())?;
        check_eq("no_new_privs", prctl_get("PR_GET_NO_NEW_PRIVS", libc::PR_GET_NO_NEW_PRIVS)?, 1)?;
        // Root (dropped) lacks CAP_SETUID: EPERM. Inside the user's namespace uid 0 is not
        // even mapped: EINVAL.
        let want = if caller.is_root() { libc::EPERM } else { libc::EINVAL };
        expect_errno("setuid(0)", unsafe { libc::setuid(0) }.into(), want)?;
        let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        expect_errno("unshare(CLONE_NEWNET) without capabilities", rc.into(), libc::EPERM)
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// An ordinary user without namespaces: `setuid(0)` is `EPERM` after the drop too.
#[test]
fn privileges_of_a_plain_user() {
    let outcome = run(Caller::User, || {
        step("drop_privileges", privileges::drop_privileges(None, false))?;
        check_eq("ids", ids()?, ([USER.uid; 3], [USER.gid; 3]))?;
        check_eq("capabilities", capabilities()?, (0, 0))?;
        check_eq("no_new_privs", prctl_get("PR_GET_NO_NEW_PRIVS", libc::PR_GET_NO_NEW_PRIVS)?, 1)?;
        expect_errno("setuid(0)", unsafe { libc::setuid(0) }.into(), libc::EPERM)
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// Root without an identity to switch to: the drop runs, and its verification refuses
/// to report success while a uid is still 0.
#[test]
fn privileges_refuse_to_leave_root_in_place() {
    let outcome = run(Caller::Root, || match privileges::drop_privileges(None, false) {
        Err(PrivilegeError::Verification(what)) => check_eq("verification", what.as_str(), "a uid is still 0"),
        other => Err(format!("drop_privileges(None) as root: {other:?}, expected Verification")),
    });
    assert_eq!(outcome, Outcome::Passed);
}

// ---------------------------------------------------------------------------------------
// Step 5: rlimits (applied after Landlock by `apply`)
// ---------------------------------------------------------------------------------------

both_callers!(rlimit_file_size, rlimit_open_files, rlimit_memory, rlimit_cpu);

fn apply_limits(limits: Limits) -> Check {
    let now = step("current_address_space", rlimits::current_address_space())?;
    step("apply_limits", rlimits::apply_limits(&limits, now))
}

/// Writing 2 MiB under a 1 MiB file-size limit: the first MiB lands, then SIGXFSZ.
fn rlimit_file_size(caller: Caller) {
    let ws = Workspace::new(caller.sandbox_identity());
    let file = ws.rw().join("big");
    let path = file.clone();
    let outcome = run(caller, move || {
        apply_limits(Limits { file_size: Some(MIB), ..Limits::default() })?;
        let mut out = io_ok("create", fs::File::create(&path))?;
        let result = out.write_all(&vec![7u8; 2 * MIB as usize]);
        Err(format!("writing 2 MiB under a 1 MiB limit was not stopped by SIGXFSZ: {result:?}"))
    });
    assert_eq!(outcome, Outcome::Signaled(libc::SIGXFSZ));
    assert_eq!(fs::metadata(&file).unwrap().len(), MIB);
}

/// 16 open files: with fds 0-2 inherited, 13 more open, the 14th is EMFILE; the hard
/// limit is the soft one.
fn rlimit_open_files(caller: Caller) {
    let outcome = run(caller, || {
        expect_ok("close_range(3, ~0)", unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) })?;
        for fd in 0..3 {
            // The harness's stdio may be closed; make sure 0-2 are taken.
            if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
                let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
                check_eq("fd for a missing stdio", null, fd)?;
            }
        }
        apply_limits(Limits { open_files: Some(16), ..Limits::default() })?;
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        expect_ok("getrlimit", unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }.into())?;
        check_eq("RLIMIT_NOFILE (soft, hard)", (limit.rlim_cur, limit.rlim_max), (16, 16))?;
        let mut opened = 0;
        loop {
            let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY) };
            if fd == -1 {
                expect_errno("open beyond the limit", -1, libc::EMFILE)?;
                break;
            }
            opened += 1;
            if opened > 16 {
                return Err(format!("opened {opened} files under a limit of 16 (last fd {fd})"));
            }
        }
        check_eq("files opened besides 0-2", opened, 13)
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// 64 MiB more address space: a 16 MiB mapping fits, a 512 MiB one is ENOMEM.
fn rlimit_memory(caller: Caller) {
    let outcome = run(caller, || {
        apply_limits(Limits { memory: Some(64 * MIB), ..Limits::default() })?;
        let map = |bytes: u64| unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        let small = map(16 * MIB);
        if small == libc::MAP_FAILED {
            return Err(format!("16 MiB mmap under a 64 MiB allowance: {}", errno_name(errno())));
        }
        unsafe { libc::munmap(small, (16 * MIB) as usize) };
        let big = map(512 * MIB);
        let rc = if big == libc::MAP_FAILED { -1 } else { big as i64 };
        expect_errno("512 MiB mmap under a 64 MiB allowance", rc, libc::ENOMEM)
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// One CPU second: a busy loop gets SIGXCPU (the hard limit, SIGKILL, is a second later).
fn rlimit_cpu(caller: Caller) {
    let started = Instant::now();
    let outcome = run(caller, || {
        apply_limits(Limits { cpu_seconds: Some(1), ..Limits::default() })?;
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut spin = 0u64;
        while Instant::now() < deadline {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        Err(format!("20 s of busy loop under a 1 s CPU limit ({spin} rounds) and no SIGXCPU"))
    });
    assert_eq!(outcome, Outcome::Signaled(libc::SIGXCPU));
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
}

// ---------------------------------------------------------------------------------------
// Step 4: Landlock (no namespaces here, so every denial below is Landlock's)
// ---------------------------------------------------------------------------------------

both_callers!(
    landlock_denies_reads_outside_the_policy,
    landlock_read_only_and_read_write_paths,
    landlock_denies_tcp_connect,
    landlock_scopes_abstract_unix_sockets,
    landlock_scopes_signals,
);

fn landlock_policy(ws: &Workspace) -> Policy {
    Policy { read_only: vec![ws.ro()], read_write: vec![ws.rw()], network: false, ..Policy::default() }
}

fn restrict(policy: &Policy) -> Check {
    let enforced =
        step("restrict_filesystem_and_network", ruleset::restrict_filesystem_and_network(policy, None, &[]))?;
    check_eq("Landlock enforcement", enforced, LandlockEnforcement::Full)
}

/// Files and directories outside the policy are EACCES, even for root.
fn landlock_denies_reads_outside_the_policy(caller: Caller) {
    assert!(Path::new("/etc/passwd").exists() && Path::new("/etc/hostname").exists());
    let ws = Workspace::new(caller.sandbox_identity());
    let policy = landlock_policy(&ws);
    let outcome = run(caller, move || {
        io_ok("read /etc/passwd before Landlock", fs::read("/etc/passwd"))?;
        restrict(&policy)?;
        expect_io_errno("read /etc/passwd", fs::read("/etc/passwd"), libc::EACCES)?;
        expect_io_errno("read /etc/hostname", fs::read("/etc/hostname"), libc::EACCES)?;
        expect_io_errno("list /", fs::read_dir("/").map(|_| ()), libc::EACCES)?;
        expect_io_errno("list /proc/self/fd", fs::read_dir("/proc/self/fd").map(|_| ()), libc::EACCES)
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// Read-only trees read but do not write (EACCES); read-write trees do both.
fn landlock_read_only_and_read_write_paths(caller: Caller) {
    let ws = Workspace::new(caller.sandbox_identity());
    let policy = landlock_policy(&ws);
    let (ro, rw) = (ws.ro(), ws.rw());
    let outcome = run(caller, move || {
        restrict(&policy)?;
        let data = io_ok("read ro/data", fs::read_to_string(ro.join("data")))?;
        check_eq("read-only file", data.as_str(), "read-only data\n")?;
        io_ok("list ro/", fs::read_dir(&ro))?;
        expect_io_errno("create a file in ro/", fs::write(ro.join("new"), "x"), libc::EACCES)?;
        let append = fs::OpenOptions::new().append(true).open(ro.join("data"));
        expect_io_errno("open ro/data for writing", append, libc::EACCES)?;
        expect_io_errno("mkdir in ro/", fs::create_dir(ro.join("dir")), libc::EACCES)?;
        io_ok("write rw/out", fs::write(rw.join("out"), "written"))?;
        check_eq("rw/out", io_ok("read rw/out", fs::read_to_string(rw.join("out")))?.as_str(), "written")?;
        io_ok("mkdir rw/dir", fs::create_dir(rw.join("dir")))?;
        io_ok("rename in rw/", fs::rename(rw.join("out"), rw.join("dir/out")))?;
        io_ok("unlink in rw/", fs::remove_file(rw.join("dir/out")))
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// With `network: false` a TCP connect to the host's listener is EACCES (the socket
/// itself may be created: that is seccomp's job).
fn landlock_denies_tcp_connect(caller: Caller) {
    let ws = Workspace::new(caller.sandbox_identity());
    let policy = landlock_policy(&ws);
    let (_listener, addr) = tcp_listener();
    let outcome = run(caller, move || {
        restrict(&policy)?;
        expect_io_errno("TCP connect to 127.0.0.1", TcpStream::connect(addr), libc::EACCES)?;
        expect_io_errno("TCP bind", TcpListener::bind("127.0.0.1:0"), libc::EACCES)
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// An abstract unix socket outside the sandbox is EPERM (scope); ones made inside work.
fn landlock_scopes_abstract_unix_sockets(caller: Caller) {
    let ws = Workspace::new(caller.sandbox_identity());
    let policy = landlock_policy(&ws);
    let (_listener, addr) = abstract_listener();
    let inner = UnixAddr::from_abstract_name(unique_name("lockdown-layers-inner").as_bytes()).unwrap();
    let outcome = run(caller, move || {
        restrict(&policy)?;
        expect_io_errno("connect to the parent's abstract socket", UnixStream::connect_addr(&addr), libc::EPERM)?;
        let _own = io_ok("bind an abstract socket inside", UnixListener::bind_addr(&inner))?;
        io_ok("connect to it", UnixStream::connect_addr(&inner)).map(drop)
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// Signals to processes outside the sandbox are EPERM (scope), even for root.
fn landlock_scopes_signals(caller: Caller) {
    let ws = Workspace::new(caller.sandbox_identity());
    let policy = landlock_policy(&ws);
    let parent = this_pid();
    let outcome = run(caller, move || {
        restrict(&policy)?;
        expect_errno("kill(parent, 0)", unsafe { libc::kill(parent, 0) }.into(), libc::EPERM)?;
        expect_ok("kill(self, 0)", unsafe { libc::kill(getpid(), 0) }.into()).map(drop)
    });
    assert_eq!(outcome, Outcome::Passed);
}

// ---------------------------------------------------------------------------------------
// Step 6: seccomp
// ---------------------------------------------------------------------------------------

both_callers!(
    seccomp_allows_ordinary_calls,
    seccomp_kills_ptrace,
    seccomp_socket_creation_is_eacces,
    seccomp_session_changes_are_eperm,
    seccomp_metadata_by_path_and_other_pids_are_eperm,
    seccomp_clone3_is_enosys,
    seccomp_kills_clone_into_a_user_namespace,
    seccomp_kills_execve,
    seccomp_unknown_calls_are_enosys,
    seccomp_kills_tiocsti,
    seccomp_exec_profile_runs_a_program,
    seccomp_network_profile_allows_sockets,
    seccomp_reports_violations_to_a_supervisor,
    seccomp_reports_clone_into_a_user_namespace,
    seccomp_listener_reports_after_a_cancelled_notification,
    seccomp_every_number_gets_its_treatment,
);

/// Run `body` after installing the closed profile (no exec, no network, SIGSYS on violations).
fn under_closed_filters(caller: Caller, body: impl FnOnce() -> Check) -> Outcome {
    let filters = closed_filters();
    run(caller, move || {
        step("install", filters.install(None))?;
        body()
    })
}

/// What ordinary programs (and glibc) need still works: fork, threads (glibc falls back
/// from clone3 to clone), pipes, an ordinary ioctl, mmap.
fn seccomp_allows_ordinary_calls(caller: Caller) {
    let outcome = under_closed_filters(caller, || {
        let mut fds = [0; 2];
        expect_ok("pipe", unsafe { libc::pipe(fds.as_mut_ptr()) }.into())?;
        expect_ok("write", unsafe { libc::write(fds[1], b"abc".as_ptr().cast(), 3) } as i64)?;
        let mut pending: libc::c_int = 0;
        expect_ok("ioctl(FIONREAD)", unsafe { libc::ioctl(fds[0], libc::FIONREAD, &mut pending) }.into())?;
        check_eq("bytes pending", pending, 3)?;
        let pid = expect_ok("fork", unsafe { libc::fork() }.into())? as libc::pid_t;
        if pid == 0 {
            unsafe { libc::_exit(7) };
        }
        let mut status = 0;
        expect_ok("waitpid", unsafe { libc::waitpid(pid, &mut status, 0) }.into())?;
        check_eq("forked child's exit status", libc::WEXITSTATUS(status), 7)?;
        let joined = std::thread::spawn(|| 6 * 7).join().map_err(|_| "thread panicked".to_string())?;
        check_eq("thread result", joined, 42)?;
        let mut v = vec![0u8; 8 << 20];
        v[8 << 19] = 1;
        check_eq("large allocation", v.iter().map(|b| u64::from(*b)).sum::<u64>(), 1)
    });
    assert_eq!(outcome, Outcome::Passed);
}

fn seccomp_kills_ptrace(caller: Caller) {
    let outcome = under_closed_filters(caller, || {
        let rc = unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) };
        Err(format!("ptrace(PTRACE_TRACEME) returned {rc} ({})", errno_name(errno())))
    });
    assert_eq!(outcome, Outcome::Signaled(libc::SIGSYS));
}

fn seccomp_socket_creation_is_eacces(caller: Caller) {
    let outcome = under_closed_filters(caller, || {
        let inet = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        expect_errno("socket(AF_INET)", inet.into(), libc::EACCES)?;
        let unix = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
        expect_errno("socket(AF_UNIX)", unix.into(), libc::EACCES)?;
        let mut fds = [0; 2];
        let rc = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) };
        expect_errno("socketpair(AF_UNIX)", rc.into(), libc::EACCES)
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// Both would succeed in a forked child (it leads no group or session yet).
fn seccomp_session_changes_are_eperm(caller: Caller) {
    let outcome = under_closed_filters(caller, || {
        expect_errno("setsid", unsafe { libc::setsid() }.into(), libc::EPERM)?;
        expect_errno("setpgid(0, 0)", unsafe { libc::setpgid(0, 0) }.into(), libc::EPERM)
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// Landlock cannot restrict metadata, so by-path chmod/utimes are refused; the fd forms
/// (on files the sandbox could open anyway) work. Resource and scheduling calls work on
/// the caller only: the parent here shares the caller's uid when run as a user.
fn seccomp_metadata_by_path_and_other_pids_are_eperm(caller: Caller) {
    let path = std::env::temp_dir().join(unique_name("lockdown-meta"));
    fs::write(&path, "x").unwrap();
    // World-writable, so the user identity may set its times through the fd.
    fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let file = fs::File::open(&path).unwrap();
    let fd = file.as_raw_fd();
    let parent = this_pid();
    let outcome = under_closed_filters(caller, move || {
        expect_errno("chmod(path)", unsafe { libc::chmod(c_path.as_ptr(), 0o777) }.into(), libc::EPERM)?;
        let at = unsafe { libc::fchmodat(libc::AT_FDCWD, c_path.as_ptr(), 0o777, 0) };
        expect_errno("fchmodat(path)", at.into(), libc::EPERM)?;
        let times = unsafe { libc::utimensat(libc::AT_FDCWD, c_path.as_ptr(), std::ptr::null(), 0) };
        expect_errno("utimensat(path)", times.into(), libc::EPERM)?;
        let mut limit = libc::rlimit { rlim_cur: 17, rlim_max: 17 };
        let rc = unsafe { libc::prlimit(parent, libc::RLIMIT_NOFILE, &limit, std::ptr::null_mut()) };
        expect_errno("prlimit(parent)", rc.into(), libc::EPERM)?;
        expect_ok(
            "prlimit(self, get)",
            unsafe { libc::prlimit(0, libc::RLIMIT_NOFILE, std::ptr::null(), &mut limit) }.into(),
        )?;
        let other = unsafe { libc::setpriority(libc::PRIO_PROCESS, parent as libc::id_t, 19) };
        expect_errno("setpriority(parent)", other.into(), libc::EPERM)?;
        let all = unsafe { libc::setpriority(libc::PRIO_USER, 0, 19) };
        expect_errno("setpriority(PRIO_USER)", all.into(), libc::EPERM)?;
        // Our own priority: set it to what it is (an unprivileged process may not raise
        // it, and CI may start us niced), which the kernel still checks and applies.
        let current = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        expect_ok("setpriority(self)", unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, current) }.into())?;
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        unsafe { libc::CPU_SET(0, &mut set) };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        expect_errno(
            "sched_setaffinity(parent)",
            unsafe { libc::sched_setaffinity(parent, size, &set) }.into(),
            libc::EPERM,
        )?;
        expect_ok("sched_setaffinity(self)", unsafe { libc::sched_setaffinity(0, size, &set) }.into())?;
        // The fd forms still work (the file is the caller's own, opened before).
        expect_ok("futimens(fd)", unsafe { libc::futimens(fd, std::ptr::null()) }.into())?;
        Ok(())
    });
    drop(file);
    fs::remove_file(&path).unwrap();
    assert_eq!(outcome, Outcome::Passed);
}

/// With a null argument the kernel itself would answer EINVAL, so ENOSYS is the filter's.
fn seccomp_clone3_is_enosys(caller: Caller) {
    let outcome = under_closed_filters(caller, || {
        let rc = unsafe { libc::syscall(libc::SYS_clone3, std::ptr::null::<u8>(), 0usize) };
        expect_errno("clone3", rc, libc::ENOSYS)
    });
    assert_eq!(outcome, Outcome::Passed);
}

fn seccomp_kills_clone_into_a_user_namespace(caller: Caller) {
    let outcome = under_closed_filters(caller, || {
        let flags = (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong;
        let rc = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
        if rc == 0 {
            unsafe { libc::_exit(0) };
        }
        Err(format!("clone(CLONE_NEWUSER) returned {rc} ({})", errno_name(errno())))
    });
    assert_eq!(outcome, Outcome::Signaled(libc::SIGSYS));
}

fn seccomp_kills_execve(caller: Caller) {
    let outcome = under_closed_filters(caller, || {
        let argv = [c"/bin/true".as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null()];
        let rc = unsafe { libc::execve(c"/bin/true".as_ptr(), argv.as_ptr(), envp.as_ptr()) };
        Err(format!("execve returned {rc} ({})", errno_name(errno())))
    });
    assert_eq!(outcome, Outcome::Signaled(libc::SIGSYS));
}

/// SysV shared memory is on no list: ENOSYS (without the filter it would succeed).
fn seccomp_unknown_calls_are_enosys(caller: Caller) {
    let outcome = under_closed_filters(caller, || {
        let rc = unsafe { libc::syscall(libc::SYS_shmget, libc::IPC_PRIVATE, 4096usize, 0o600) };
        expect_errno("shmget", rc, libc::ENOSYS)?;
        let rc = unsafe { libc::syscall(libc::SYS_mknodat, libc::AT_FDCWD, c"/x".as_ptr(), 0, 0) };
        expect_errno("mknodat", rc, libc::ENOSYS)
    });
    assert_eq!(outcome, Outcome::Passed);
}

fn seccomp_kills_tiocsti(caller: Caller) {
    let outcome = under_closed_filters(caller, || {
        let byte = b'x';
        let rc = unsafe { libc::ioctl(0, libc::TIOCSTI, &byte) };
        Err(format!("ioctl(TIOCSTI) returned {rc} ({})", errno_name(errno())))
    });
    assert_eq!(outcome, Outcome::Signaled(libc::SIGSYS));
}

/// With `exec` the allowlist is enough for a dynamically linked program to start and
/// run: /bin/false's own exit status comes back.
fn seccomp_exec_profile_runs_a_program(caller: Caller) {
    let filters = SeccompFilters::build(SeccompProfile {
        exec: true,
        network: false,
        observe: false,
        private_root: false,
        report_network: false,
    })
    .unwrap();
    let outcome = run(caller, move || {
        step("install", filters.install(None))?;
        let argv = [c"/bin/false".as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null()];
        unsafe { libc::execve(c"/bin/false".as_ptr(), argv.as_ptr(), envp.as_ptr()) };
        Err(format!("execve /bin/false: {}", errno_name(errno())))
    });
    assert_eq!(outcome, Outcome::Exited(1));
}

/// With `network` (by proxy) only TCP client sockets are made and connected, and a
/// unix socketpair (libcurl's wakeup); every other family, type or protocol is EACCES,
/// and no server: bind, listen and accept are EPERM. Peer credentials stay refused.
fn seccomp_network_profile_allows_sockets(caller: Caller) {
    let filters = SeccompFilters::build(SeccompProfile {
        exec: false,
        network: true,
        observe: false,
        private_root: false,
        report_network: false,
    })
    .unwrap();
    let (_listener, addr) = tcp_listener();
    let outcome = run(caller, move || {
        step("install", filters.install(None))?;
        io_ok("TCP connect to 127.0.0.1", TcpStream::connect(addr))?;
        let pair = io_ok("socketpair", UnixStream::pair())?;
        let socket = |family, kind, protocol| -> io::Result<RawFd> {
            match unsafe { libc::socket(family, kind, protocol) } {
                fd if fd >= 0 => Ok(fd),
                _ => Err(io::Error::last_os_error()),
            }
        };
        let flags = libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
        io_ok("TCP socket with its flags", socket(libc::AF_INET, libc::SOCK_STREAM | flags, libc::IPPROTO_TCP))?;
        for (what, family, kind, protocol) in [
            ("UDP socket", libc::AF_INET, libc::SOCK_DGRAM, 0),
            ("raw socket", libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
            ("IPv6 TCP socket", libc::AF_INET6, libc::SOCK_STREAM, 0),
            ("unix socket", libc::AF_UNIX, libc::SOCK_STREAM, 0),
            ("netlink socket", libc::AF_NETLINK, libc::SOCK_RAW, 0),
            ("packet socket", libc::AF_PACKET, libc::SOCK_RAW, 0),
            ("MPTCP socket", libc::AF_INET, libc::SOCK_STREAM, 262),
        ] {
            expect_io_errno(what, socket(family, kind, protocol), libc::EACCES)?;
        }
        let udp_pair = unsafe { libc::socketpair(libc::AF_INET, libc::SOCK_STREAM, 0, [0; 2].as_mut_ptr()) };
        expect_errno("socketpair(AF_INET)", udp_pair.into(), libc::EACCES)?;
        expect_io_errno("TCP bind", TcpListener::bind("127.0.0.1:0"), libc::EPERM)?;
        let tcp = io_ok("TCP socket", socket(libc::AF_INET, libc::SOCK_STREAM, 0))?;
        expect_errno("listen", unsafe { libc::listen(tcp, 1) }.into(), libc::EPERM)?;
        let accepted = unsafe { libc::accept4(tcp, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
        expect_errno("accept4", accepted.into(), libc::EPERM)?;
        let (mut cred, mut len) = ([0u8; 12], 12u32);
        let rc = unsafe {
            libc::getsockopt(
                pair.0.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                cred.as_mut_ptr().cast(),
                &mut len,
            )
        };
        expect_errno("getsockopt(SO_PEERCRED)", rc.into(), libc::EPERM)
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// With a report socket a violation is not a signal: the supervisor receives the listener
/// over the socket, sees the call (`unshare`) and the pid, and denies it; the sandbox
/// sees EPERM and goes on.
fn seccomp_reports_violations_to_a_supervisor(caller: Caller) {
    let filters = closed_filters();
    let (supervisor, sandbox_end) = UnixStream::pair().unwrap();
    let report_fd = sandbox_end.as_raw_fd();
    let child = spawn(caller, move || {
        // install(Some) calls seccomp(2) itself, which needs no_new_privs (or
        // CAP_SYS_ADMIN); `apply` sets it in the privileges step.
        expect_ok("PR_SET_NO_NEW_PRIVS", unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }.into())?;
        step("install", filters.install(Some(report_fd)))?;
        expect_errno("unshare(CLONE_NEWNET)", unsafe { libc::unshare(libc::CLONE_NEWNET) }.into(), libc::EPERM)
    });
    drop(sandbox_end);
    let listener = match receive_fd(&supervisor) {
        Ok(fd) => fd,
        Err(e) => panic!("no seccomp listener received ({e}); the child: {:?}", child.wait()),
    };
    deny_one_unshare(listener, child.pid);
    unsafe { libc::close(listener) };
    assert_eq!(child.wait(), Outcome::Passed);
}

/// Supervisor side: wait for one notification, check it is `nr` from `pid`, deny it.
fn deny_one(listener: RawFd, pid: libc::pid_t, nr: libc::c_long) {
    let mut poll = libc::pollfd { fd: listener, events: libc::POLLIN, revents: 0 };
    let ready = unsafe { libc::poll(&mut poll, 1, 10_000) };
    assert_eq!(ready, 1, "no seccomp notification within 10 s (revents {:#x})", poll.revents);
    let notification = seccomp::receive_notification(listener).unwrap();
    assert_eq!((notification.syscall, notification.pid), (nr, pid as u32), "{notification:?}");
    seccomp::deny_notification(listener, notification.id).unwrap();
}

/// `clone` with a namespace flag is a violation the supervisor sees (call and pid), not
/// a clone: denied, the sandbox gets EPERM.
fn seccomp_reports_clone_into_a_user_namespace(caller: Caller) {
    let filters = closed_filters();
    let (supervisor, sandbox_end) = UnixStream::pair().unwrap();
    let report_fd = sandbox_end.as_raw_fd();
    let child = spawn(caller, move || {
        expect_ok("PR_SET_NO_NEW_PRIVS", unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }.into())?;
        step("install", filters.install(Some(report_fd)))?;
        let flags = (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong;
        let rc = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
        if rc == 0 {
            unsafe { libc::_exit(0) };
        }
        expect_errno("clone(CLONE_NEWUSER)", rc, libc::EPERM)?;
        // The masked compare: the flag beside others, and upper bits that are no flags.
        let flags = (libc::CLONE_NEWUSER | libc::CLONE_FILES | libc::SIGCHLD) as libc::c_ulong | (1 << 40);
        let rc = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
        if rc == 0 {
            unsafe { libc::_exit(0) };
        }
        expect_errno("clone(CLONE_NEWUSER | CLONE_FILES)", rc, libc::EPERM)?;
        // CLONE_PARENT would make a process outside the caller's children.
        let flags = (libc::CLONE_PARENT | libc::SIGCHLD) as libc::c_ulong;
        // SAFETY: clone without CLONE_VM or a new stack is a fork; the seccomp filter is
        // expected to refuse it, and a child, if made, only exits.
        let rc = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
        if rc == 0 {
            // SAFETY: _exit in the forked child touches nothing of the parent's.
            unsafe { libc::_exit(0) };
        }
        expect_errno("clone(CLONE_PARENT)", rc, libc::EPERM)
    });
    drop(sandbox_end);
    let listener = match receive_fd(&supervisor) {
        Ok(fd) => fd,
        Err(e) => panic!("no seccomp listener received ({e}); the child: {:?}", child.wait()),
    };
    for _ in 0..3 {
        deny_one(listener, child.pid, libc::SYS_clone);
    }
    unsafe { libc::close(listener) };
    assert_eq!(child.wait(), Outcome::Passed);
}

/// A violation whose caller dies before the answer is a cancelled notification
/// (`ENOENT` on the answer); the listener goes on reporting the next one.
fn seccomp_listener_reports_after_a_cancelled_notification(caller: Caller) {
    let filters = closed_filters();
    let (supervisor, sandbox_end) = UnixStream::pair().unwrap();
    let report_fd = sandbox_end.as_raw_fd();
    let child = spawn(caller, move || {
        expect_ok("PR_SET_NO_NEW_PRIVS", unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }.into())?;
        step("install", filters.install(Some(report_fd)))?;
        let pid = expect_ok("fork", unsafe { libc::fork() }.into())? as libc::pid_t;
        if pid == 0 {
            // The grandchild's violation: left pending until the supervisor kills it.
            unsafe { libc::unshare(libc::CLONE_NEWNET) };
            unsafe { libc::_exit(3) };
        }
        let mut status = 0;
        expect_ok("waitpid", unsafe { libc::waitpid(pid, &mut status, 0) }.into())?;
        check_eq("grandchild killed", (libc::WIFSIGNALED(status), libc::WTERMSIG(status)), (true, libc::SIGKILL))?;
        expect_errno(
            "unshare(CLONE_NEWNET) after the cancelled one",
            unsafe { libc::unshare(libc::CLONE_NEWNET) }.into(),
            libc::EPERM,
        )
    });
    drop(sandbox_end);
    let listener = match receive_fd(&supervisor) {
        Ok(fd) => fd,
        Err(e) => panic!("no seccomp listener received ({e}); the child: {:?}", child.wait()),
    };
    let mut poll = libc::pollfd { fd: listener, events: libc::POLLIN, revents: 0 };
    // The fork itself is not reported: the first notification is the grandchild's.
    assert_eq!(unsafe { libc::poll(&mut poll, 1, 10_000) }, 1, "no notification from the grandchild");
    let pending = seccomp::receive_notification(listener).unwrap();
    assert_eq!(pending.syscall, libc::SYS_unshare);
    assert_ne!(pending.pid, child.pid as u32, "the grandchild's call, not the child's: {pending:?}");
    unsafe { libc::kill(pending.pid as libc::pid_t, libc::SIGKILL) };
    // The kernel cancels the notification once the caller is gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    while unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &pending.id) } == 0 {
        assert!(Instant::now() < deadline, "the killed caller's notification is still valid");
        std::thread::sleep(Duration::from_millis(2));
    }
    let late = seccomp::deny_notification(listener, pending.id);
    assert_eq!(late.map_err(|e| e.raw_os_error()), Err(Some(libc::ENOENT)), "answer to a cancelled notification");
    deny_one(listener, child.pid, libc::SYS_unshare);
    unsafe { libc::close(listener) };
    assert_eq!(child.wait(), Outcome::Passed);
}

/// The errno the catch-all under the program answers (see [`sweep`]).
const CAUGHT: i32 = 1000;
/// The errno the test supervisor answers violations with.
const VIOLATION: i32 = 1001;
const SWEEP_LAST: usize = 500;
const SWEEP_EXIT: u64 = 77;
/// `uretprobe` (335) and `uprobe` (336) on x86_64: the kernel passes them by seccomp
/// (they are called from uprobe trampolines) and answers a call from anywhere else with
/// SIGILL. No filter can see them, so the sweep leaves them out.
const SECCOMP_EXEMPT: [usize; 2] = [335, 336];

/// A filter installed before the program: `under` for every call, except what the test
/// child needs to install the program and leave (calls with non-zero arguments the
/// sweep, whose arguments are all zero, never makes).
fn catch_all(under: libseccomp::ScmpAction, report_fd: RawFd) -> libseccomp::ScmpFilterContext {
    use libseccomp::{ScmpAction, ScmpArgCompare, ScmpCompareOp::*, ScmpFilterContext, ScmpSyscall};
    let mut ctx = ScmpFilterContext::new(under).unwrap();
    ctx.set_ctl_nnp(false).unwrap();
    let rules: [(libc::c_long, ScmpArgCompare); 5] = [
        (libc::SYS_prctl, ScmpArgCompare::new(0, Equal, libc::PR_SET_NO_NEW_PRIVS as u64)),
        (libc::SYS_seccomp, ScmpArgCompare::new(0, Equal, libc::SECCOMP_SET_MODE_FILTER as u64)),
        (libc::SYS_sendmsg, ScmpArgCompare::new(0, Equal, report_fd as u64)),
        (libc::SYS_close, ScmpArgCompare::new(0, NotEqual, 0)),
        (libc::SYS_exit_group, ScmpArgCompare::new(0, Equal, SWEEP_EXIT)),
    ];
    for (nr, cmp) in rules {
        ctx.add_rule_conditional(ScmpAction::Allow, ScmpSyscall::from(nr as i32), &[cmp]).unwrap();
    }
    ctx
}

/// In a child: install `catch_all`, then the program for `profile` with a report socket,
/// then make every call 0..=500 with zero arguments. Returns the errno each got (0: no
/// error) and the calls the program's listener reported (answered `VIOLATION`).
fn sweep(caller: Caller, profile: SeccompProfile, under: libseccomp::ScmpAction) -> (Vec<i32>, Vec<i64>) {
    use std::sync::atomic::{AtomicI32, Ordering::SeqCst};
    let filters = SeccompFilters::build(profile).unwrap();
    let (supervisor, sandbox_end) = UnixStream::pair().unwrap();
    let report_fd = sandbox_end.as_raw_fd();
    let outer = catch_all(under, report_fd);
    let page = SharedReport::new();
    let errnos = page.base as usize;
    let child = spawn(caller, move || {
        let errnos = unsafe { std::slice::from_raw_parts(errnos as *const AtomicI32, SWEEP_LAST + 1) };
        expect_ok("PR_SET_NO_NEW_PRIVS", unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }.into())?;
        outer.load().map_err(|e| format!("load the catch-all: {e}"))?;
        step("install", filters.install(Some(report_fd)))?;
        for (nr, slot) in errnos.iter().enumerate() {
            if SECCOMP_EXEMPT.contains(&nr) {
                continue;
            }
            slot.store(-2, SeqCst);
            let rc = unsafe { libc::syscall(nr as libc::c_long, 0usize, 0usize, 0usize, 0usize, 0usize, 0usize) };
            slot.store(if rc == -1 { errno() } else { 0 }, SeqCst);
        }
        unsafe { libc::syscall(libc::SYS_exit_group, SWEEP_EXIT) };
        Err("exit_group returned".into())
    });
    drop(sandbox_end);
    let listener = match receive_fd(&supervisor) {
        Ok(fd) => fd,
        Err(e) => panic!("no seccomp listener received ({e}); the child: {:?}", child.wait()),
    };
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.pid, 0) } as RawFd;
    assert!(pidfd >= 0, "pidfd_open: {}", io::Error::last_os_error());
    let mut reported = Vec::new();
    loop {
        let mut fds = [listener, pidfd].map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
        assert!(unsafe { libc::poll(fds.as_mut_ptr(), 2, 10_000) } > 0, "the sweep stalled");
        if fds[0].revents & libc::POLLIN != 0 {
            let n = seccomp::receive_notification(listener).unwrap();
            reported.push(n.syscall);
            let resp = libc::seccomp_notif_resp { id: n.id, val: 0, error: -VIOLATION, flags: 0 };
            assert_eq!(
                unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) },
                0,
                "{}",
                io::Error::last_os_error()
            );
        } else if fds[1].revents != 0 {
            break;
        }
    }
    unsafe {
        libc::close(listener);
        libc::close(pidfd);
    }
    let errnos = unsafe { std::slice::from_raw_parts(page.base as *const AtomicI32, SWEEP_LAST + 1) };
    let outcome = child.wait();
    let reached = errnos.iter().position(|e| e.load(SeqCst) == -2);
    assert_eq!(outcome, Outcome::Exited(SWEEP_EXIT as i32), "the sweep stopped at {reached:?}");
    (errnos.iter().map(|e| e.load(SeqCst)).collect(), reported)
}

/// Every number 0..=500 through the kernel, nothing executed. Under the program sits a
/// catch-all (the kernel runs both and takes the most severe answer): first one
/// answering `ERRNO(1000)`, which the program's own errnos override (the more recent
/// filter wins among equal actions) and which hides its allows and its violations
/// alike; then one answering `TRACE` (no tracer: `ENOSYS`, not executed), below the
/// program's user notification, so its violations reach its listener. Together they
/// tell, per number, allow, violation, or which errno.
fn seccomp_every_number_gets_its_treatment(caller: Caller) {
    use libseccomp::ScmpAction;
    for exec in [false, true] {
        for network in [false, true] {
            let profile = SeccompProfile { exec, network, observe: false, private_root: false, report_network: false };
            let (errnos, hidden) = sweep(caller, profile, ScmpAction::Errno(CAUGHT));
            assert_eq!(hidden, Vec::<i64>::new(), "ERRNO outranks USER_NOTIF: no report expected");
            let (traced, reported) = sweep(caller, profile, ScmpAction::Trace(0));
            let mut wrong = Vec::new();
            for nr in (0..=SWEEP_LAST).filter(|nr| !SECCOMP_EXEMPT.contains(nr)) {
                let entry = seccomp::SYSCALLS.iter().find(|(_, n, _)| *n == nr as libc::c_long);
                let want = match entry.map(|(_, _, t)| *t) {
                    // Swept with zero arguments: prctl option 0 is none of the allowed ones.
                    _ if nr as libc::c_long == libc::SYS_prctl => libc::EPERM,
                    None => libc::ENOSYS,
                    Some(seccomp::Treatment::Allow) => CAUGHT,
                    Some(seccomp::Treatment::Exec) => {
                        if exec {
                            CAUGHT
                        } else {
                            VIOLATION
                        }
                    }
                    Some(seccomp::Treatment::Violation) => VIOLATION,
                    // Swept with zero arguments: family 0 is neither AF_INET nor AF_UNIX.
                    Some(seccomp::Treatment::SocketCreate) => libc::EACCES,
                    Some(seccomp::Treatment::SocketConnect) => {
                        if network {
                            CAUGHT
                        } else {
                            libc::ENOSYS
                        }
                    }
                    Some(seccomp::Treatment::SocketServe) => {
                        if network {
                            libc::EPERM
                        } else {
                            libc::ENOSYS
                        }
                    }
                    // Swept without a private root: refused.
                    Some(seccomp::Treatment::Refused | seccomp::Treatment::ByPath) => libc::EPERM,
                    // Swept with zero flags: an ordinary fork, allowed and not reported.
                    Some(seccomp::Treatment::Fork) => CAUGHT,
                };
                let was_reported = reported.contains(&(nr as i64));
                let got = match (errnos[nr], was_reported) {
                    (CAUGHT, true) if traced[nr] == VIOLATION => VIOLATION,
                    (CAUGHT, false) if traced[nr] == libc::ENOSYS => CAUGHT,
                    (CAUGHT, _) => -1,
                    (e, false) if traced[nr] == e => e,
                    _ => -1,
                };
                if got != want {
                    let name = entry.map_or("?", |e| e.0);
                    wrong.push(format!(
                        "{nr} {name}: under ERRNO {}, under TRACE {}, reported {was_reported}; want {want}",
                        errnos[nr], traced[nr]
                    ));
                }
            }
            assert!(wrong.is_empty(), "under {profile:?}:\n{}", wrong.join("\n"));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Everything: lockdown::apply
// ---------------------------------------------------------------------------------------

// The whole lockdown, as root and as an ordinary user.
both_callers!(
    apply_full_policy,
    apply_workspace_quota,
    apply_private_root,
    apply_private_root_from_a_template,
    apply_private_root_keeps_record_locks_private,
    apply_without_private_root_refuses_record_locks_and_by_path_metadata,
    apply_full_policy_kills_violations,
    apply_reports_violations_over_violation_fd,
    apply_network_by_proxy_hands_its_listener_over_and_reaches_nothing_else,
    apply_in_learning_mode_reports_file_calls_and_continuing_grants_nothing,
    command_spawn_runs_a_program_from_a_single_threaded_caller,
);

/// `command::spawn` needs a single-threaded caller (the test harness itself is refused,
/// see the unit test in `command.rs`); from a freshly forked child it starts a program
/// under the policy, and the program's own status comes back.
fn command_spawn_runs_a_program_from_a_single_threaded_caller(caller: Caller) {
    let ws = Workspace::new(caller.sandbox_identity());
    // The program and its dynamic loader (mapped with execute rights).
    let loader = fs::canonicalize("/lib64/ld-linux-x86-64.so.2")
        .or_else(|_| fs::canonicalize("/lib/ld-linux-aarch64.so.1"))
        .unwrap();
    let policy = Policy { executable: vec!["/usr/bin/false".into(), loader], ..realistic_policy(caller, &ws) };
    let outcome = run(caller, move || {
        check_eq("threads of the forked child", io_ok("thread_count", lockdown::command::thread_count())?, 1)?;
        let program = Path::new("/usr/bin/false");
        let pid = step("spawn", lockdown::command::spawn(&policy, program, &["false".into()], &[], None, None))?.pid;
        let mut status = 0;
        expect_ok("waitpid", unsafe { libc::waitpid(pid, &mut status, 0) }.into())?;
        check_eq("exit status of /usr/bin/false", (libc::WIFEXITED(status), libc::WEXITSTATUS(status)), (true, 1))
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// A spawned child runs in its parent's memory until its exec (`CLONE_VM`), so nothing
/// it records may stick to the parent: after a child that joined pinned empty
/// namespaces, the next one the same process spawns without them still makes its own,
/// and runs in neither the host's network namespace nor the pinned one.
#[test]
fn command_spawn_leaves_no_joined_namespaces_behind() {
    let ws = Workspace::new(RUN_AS);
    let pins = ws.root.join("pins");
    fs::create_dir(&pins).unwrap();
    fs::set_permissions(&pins, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let loader = fs::canonicalize("/lib64/ld-linux-x86-64.so.2")
        .or_else(|_| fs::canonicalize("/lib/ld-linux-aarch64.so.1"))
        .unwrap();
    let sleep = fs::canonicalize("/bin/sleep").unwrap();
    let policy = Policy { executable: vec![sleep.clone(), loader], ..realistic_policy(Caller::Root, &ws) };
    let pin_dir = pins.clone();
    let outcome = run(Caller::Root, move || {
        let pins = pin_dir;
        let net_of =
            |pid: libc::pid_t| io_ok("read a net namespace link", fs::read_link(format!("/proc/{pid}/ns/net")));
        let host = net_of(std::process::id() as libc::pid_t)?;
        // Held above fds 3 and 4, which the child takes for its own (pins held there
        // are not used).
        let _low = [0, 1, 2].map(|_| fs::File::open("/dev/null").unwrap());
        let pinned = io_ok("pin empty namespaces", lockdown::namespaces::PinnedNamespaces::open_or_pin(&pins))?;
        let mut seen = Vec::new();
        for shared in [Some(&pinned), None] {
            let args = ["sleep".to_string(), "5".to_string()];
            let pid = step("spawn", lockdown::command::spawn(&policy, &sleep, &args, &[], shared, None))?.pid;
            seen.push(net_of(pid)?);
            // SAFETY: ending and reaping our own child, whose namespace was read.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            // SAFETY: as above.
            expect_ok("waitpid", unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) }.into())?;
        }
        let pinned_net = std::os::unix::fs::MetadataExt::ino(&io_ok(
            "stat the pinned net namespace",
            fs::metadata(pins.join("net")),
        )?);
        check_eq("the first child's net namespace", seen[0].clone(), PathBuf::from(format!("net:[{pinned_net}]")))?;
        check_eq("the second child's is its own", (seen[1] != host, seen[1] != seen[0]), (true, true))
    });
    for name in ["net", "ipc", "uts"] {
        let pin = std::ffi::CString::new(pins.join(name).into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a path we own; unpinning the test's namespaces so its workspace goes.
        unsafe { libc::umount2(pin.as_ptr(), libc::MNT_DETACH) };
    }
    assert_eq!(outcome, Outcome::Passed);
}

fn realistic_policy(caller: Caller, ws: &Workspace) -> Policy {
    Policy {
        read_only: ["/usr", "/lib", "/lib64", "/etc/ld.so.cache"].into_iter().map(PathBuf::from).collect(),
        read_write: vec![ws.root.clone(), "/dev/null".into()],
        executable: Vec::new(),
        network: false,
        limits: Limits {
            memory: Some(256 * MIB),
            cpu_seconds: Some(10),
            file_size: Some(16 * MIB),
            processes: Some(64),
            open_files: Some(64),
            stack: Some(8 * MIB),
        },
        run_as: caller.run_as(),
        namespaces: true,
        workspace_quota: None,
        private_root: false,
        best_effort: false,
        keep_fds_below: 3,
        violation_fd: None,
        visible_only: Vec::new(),
        nice: None,
        learning: false,
    }
}

fn expected_applied(caller: Caller) -> Applied {
    Applied {
        namespaces: caller.namespaces().into_iter().map(String::from).collect(),
        workspace_quota: None,
        private_root: false,
        identity: caller.run_as(),
        landlock: LandlockEnforcement::Full,
        seccomp: true,
        nice: None,
        programs: 0,
        learning: false,
        proxy_port: None,
    }
}

fn apply(policy: &Policy, filters: &SeccompFilters, parent: libc::pid_t) -> Result<Applied, String> {
    step("apply", lockdown::apply(policy, filters, parent))
}

/// Every layer at once, as the zygote would apply them.
fn apply_full_policy(caller: Caller) {
    let ws = Workspace::new(caller.sandbox_identity());
    let policy = realistic_policy(caller, &ws);
    let filters = SeccompFilters::build(policy.seccomp_profile()).unwrap();
    let parent = this_pid();
    let root = ws.root.clone();
    let outcome = run(caller, move || {
        let applied = apply(&policy, &filters, parent)?;
        check_eq("Applied", applied, expected_applied(caller))?;
        let id = caller.sandbox_identity();
        check_eq("ids", ids()?, ([id.uid; 3], [id.gid; 3]))?;
        check_eq("capabilities", capabilities()?, (0, 0))?;
        expect_io_errno("read /etc/passwd", fs::read("/etc/passwd"), libc::EACCES)?;
        io_ok("read /etc/ld.so.cache", fs::read("/etc/ld.so.cache"))?;
        io_ok("list /usr/lib", fs::read_dir("/usr/lib"))?;
        io_ok("write the workspace", fs::write(root.join("out"), "written"))?;
        check_eq("read back", io_ok("read", fs::read_to_string(root.join("out")))?.as_str(), "written")?;
        let null = fs::OpenOptions::new().write(true).open("/dev/null");
        io_ok("write /dev/null", null.and_then(|mut f| f.write_all(b"x")))?;
        expect_io_errno("write /usr", fs::write("/usr/lockdown-layers", "x"), libc::EACCES)?;
        let inet = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        expect_errno("socket(AF_INET)", inet.into(), libc::EACCES)?;
        expect_errno("kill(parent, 0)", unsafe { libc::kill(parent, 0) }.into(), libc::EPERM)?;
        check_eq("own process group", unsafe { libc::getpgrp() }, getpid())?;
        check_eq("PR_GET_DUMPABLE", prctl_get("PR_GET_DUMPABLE", libc::PR_GET_DUMPABLE)?, 0)?;
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        expect_ok("getrlimit", unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut limit) }.into())?;
        check_eq("RLIMIT_NPROC", (limit.rlim_cur, limit.rlim_max), (64, 64))
    });
    assert_eq!(outcome, Outcome::Passed);
    assert_eq!(fs::read_to_string(ws.root.join("out")).unwrap(), "written");
}

/// The quota: a private tmpfs over the workspace. Writes past its size fail with ENOSPC,
/// the files live only in the sandbox's mount namespace, and the host dir stays empty.
fn apply_workspace_quota(caller: Caller) {
    let ws = Workspace::new(caller.sandbox_identity());
    let mut policy = realistic_policy(caller, &ws);
    policy.workspace_quota = Some(lockdown::WorkspaceQuota { path: ws.root.clone(), bytes: 4 * MIB });
    let filters = SeccompFilters::build(policy.seccomp_profile()).unwrap();
    let parent = this_pid();
    let root = ws.root.clone();
    let outcome = run(caller, move || {
        let applied = apply(&policy, &filters, parent)?;
        check_eq("workspace_quota", applied.workspace_quota, Some(4 * MIB))?;
        check_eq("cwd", io_ok("getcwd", std::env::current_dir())?, root.clone())?;
        io_ok("write 1 MiB", fs::write(root.join("small"), vec![0u8; MIB as usize]))?;
        expect_io_errno("write 8 MiB", fs::write(root.join("big"), vec![0u8; 8 * MIB as usize]), libc::ENOSPC)
    });
    assert_eq!(outcome, Outcome::Passed);
    assert!(!ws.root.join("small").exists(), "the sandbox's files never reach the host directory");
}

/// The private root: host paths outside the policy do not exist at all (not even for
/// `stat`, which Landlock does not cover), the policy's paths work as before.
fn apply_private_root(caller: Caller) {
    let ws = Workspace::new(caller.sandbox_identity());
    let mut policy = realistic_policy(caller, &ws);
    policy.workspace_quota = Some(lockdown::WorkspaceQuota { path: ws.root.clone(), bytes: 4 * MIB });
    policy.private_root = true;
    let filters = SeccompFilters::build(policy.seccomp_profile()).unwrap();
    let parent = this_pid();
    let root = ws.root.clone();
    let outcome = run(caller, move || {
        check_eq("private_root reported", apply(&policy, &filters, parent)?.private_root, true)?;
        for hidden in ["/home", "/root", "/etc/passwd", "/proc/self", "/tmp/lockdown-layers-absent"] {
            expect_io_errno(&format!("stat {hidden}"), fs::metadata(hidden), libc::ENOENT)?;
        }
        io_ok("read /etc/ld.so.cache", fs::read("/etc/ld.so.cache"))?;
        io_ok("list /usr/lib", fs::read_dir("/usr/lib"))?;
        io_ok("write the workspace", fs::write(root.join("out"), "written"))?;
        let null = fs::OpenOptions::new().write(true).open("/dev/null");
        io_ok("write /dev/null", null.and_then(|mut f| f.write_all(b"x")))?;
        // The read-only bind answers before Landlock does.
        expect_io_errno("write /usr (read-only bind)", fs::write("/usr/lockdown-layers", "x"), libc::EROFS)
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// A private root copied from a template (`lockdown::root_template`; without root, from
/// one in a user namespace of its own): the child sees the policy's root as if it had
/// built it, its own workspace with its quota, and nothing of a sibling's workspace; the
/// template's fds are gone after the lockdown.
fn apply_private_root_from_a_template(caller: Caller) {
    let id = caller.sandbox_identity();
    let ws = Workspace::new(id);
    let (own, sibling) = (ws.root.join("ws-own"), ws.root.join("ws-sibling"));
    for dir in [&own, &sibling] {
        fs::create_dir(dir).unwrap();
        std::os::unix::fs::chown(dir, Some(id.uid), Some(id.gid)).unwrap();
    }
    let policy_for = |workspace: &Path| {
        let mut policy = realistic_policy(caller, &ws);
        policy.read_write = vec![workspace.to_path_buf(), "/dev/null".into()];
        policy.workspace_quota = Some(lockdown::WorkspaceQuota { path: workspace.to_path_buf(), bytes: 4 * MIB });
        policy.private_root = true;
        policy
    };
    let (first, policy) = (policy_for(&sibling), policy_for(&own));
    let other_root = Policy { read_only: vec!["/usr".into()], ..policy.clone() };
    let filters = SeccompFilters::build(policy.seccomp_profile()).unwrap();
    let parent = this_pid();
    let written = own.join("small");
    let outcome = run(caller, move || {
        // Built for the sibling's policy; it serves every workspace of the same parent.
        let template = step("build the template", RootTemplate::build(&first))?;
        check_eq("fits a sibling workspace's policy", template.fits(&policy), true)?;
        check_eq("fits another root", template.fits(&other_root), false)?;
        // The rules' paths opened once in the template's root (all but the workspace's).
        let opened: Vec<_> = template.opened_paths().iter().map(|p| p.raw_fd()).collect();
        check_eq("paths opened in the template", opened.len() + 1, policy.read_only.len() + policy.read_write.len())?;
        let fds = [template.fds(), opened].concat();
        let applied = step("apply", lockdown::apply_with_root(&policy, &filters, parent, Some(&template)))?;
        // Its fds were closed by the lockdown: dropping it would close them twice.
        std::mem::forget(template);
        check_eq("private_root, quota", (applied.private_root, applied.workspace_quota), (true, Some(4 * MIB)))?;
        let namespaces: Vec<String> = caller.namespaces().into_iter().map(String::from).collect();
        check_eq("namespaces", applied.namespaces, namespaces)?;
        check_eq("ids", ids()?, ([id.uid; 3], [id.gid; 3]))?;
        check_eq("capabilities", capabilities()?, (0, 0))?;
        check_eq("cwd", io_ok("getcwd", std::env::current_dir())?, own.clone())?;
        for fd in fds {
            expect_errno("fcntl(template fd)", unsafe { libc::fcntl(fd, libc::F_GETFD) }.into(), libc::EBADF)?;
        }
        for hidden in ["/home", "/root", "/etc/passwd", "/proc/self"] {
            expect_io_errno(&format!("stat {hidden}"), fs::metadata(hidden), libc::ENOENT)?;
        }
        expect_io_errno("stat the sibling's workspace", fs::metadata(&sibling), libc::ENOENT)?;
        io_ok("read /etc/ld.so.cache", fs::read("/etc/ld.so.cache"))?;
        io_ok("list /usr/lib", fs::read_dir("/usr/lib"))?;
        // Granted by rules made from the template's opened paths: a file, read-write.
        io_ok(
            "write /dev/null",
            fs::OpenOptions::new().write(true).open("/dev/null").and_then(|mut f| f.write_all(b"x")),
        )?;
        io_ok("write 1 MiB", fs::write(own.join("small"), vec![0u8; MIB as usize]))?;
        expect_io_errno("write 8 MiB", fs::write(own.join("big"), vec![0u8; 8 * MIB as usize]), libc::ENOSPC)?;
        // The template's way: the workspace's parent is a small tmpfs of the child's own.
        let parent_fs =
            io_ok("statvfs the parent", rustix::fs::statvfs(own.parent().unwrap()).map_err(io::Error::from))?;
        check_eq("size of the parent's tmpfs", parent_fs.f_blocks * parent_fs.f_frsize, 64 << 10)?;
        let beside = own.parent().unwrap().join("beside");
        expect_io_errno("write beside the workspace", fs::write(beside, "x"), libc::EROFS)?;
        expect_io_errno("write /usr (read-only overlay)", fs::write("/usr/lockdown-layers", "x"), libc::EROFS)
    });
    assert_eq!(outcome, Outcome::Passed);
    assert!(!written.exists(), "the sandbox's files never reach the host directory");
}

/// A template is only offered where it can serve: not for a policy without a private
/// root, and the same one again for a policy of the same root until it is older than
/// `MAX_AGE`.
#[test]
fn root_templates_are_kept_per_root_and_only_for_private_roots() {
    let ws = Workspace::new(RUN_AS);
    let mut policy = realistic_policy(Caller::Root, &ws);
    policy.workspace_quota = Some(lockdown::WorkspaceQuota { path: ws.root.clone(), bytes: 4 * MIB });
    let without_private_root = policy.clone();
    policy.private_root = true;
    let outcome = run(Caller::Root, move || {
        // A root that cannot be built (its workspaces' parent is missing) is an error
        // with the helper's reason, never a template.
        let mut unbuildable = policy.clone();
        unbuildable.workspace_quota =
            Some(lockdown::WorkspaceQuota { path: "/lockdown-layers-absent/ws".into(), bytes: 4 * MIB });
        let refused = RootTemplate::build(&unbuildable).err().map(|e| error_chain(&e)).unwrap_or_default();
        check_eq("the reason names the mount", refused.contains("tmpfs root"), true)?;
        let mut templates = RootTemplates::default();
        check_eq("without a private root", templates.for_policy(&without_private_root).is_none(), true)?;
        check_eq("unbuildable", templates.for_policy(&unbuildable).is_none(), true)?;
        let first = templates.for_policy(&policy).map(|t| t.built_at()).ok_or("no template built")?;
        check_eq("the same template again", templates.for_policy(&policy).map(|t| t.built_at()), Some(first))?;
        // Built again once older than MAX_AGE, so a host change to a read-only tree
        // reaches new sandboxes within that time.
        std::thread::sleep(lockdown::root_template::MAX_AGE + Duration::from_millis(100));
        let again = templates.for_policy(&policy).map(|t| t.built_at()).ok_or("no template rebuilt")?;
        check_eq("rebuilt after MAX_AGE", again > first + lockdown::root_template::MAX_AGE, true)
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// `fcntl(fd, cmd, {l_type, whole file})`.
fn record_lock(fd: RawFd, cmd: libc::c_int, l_type: libc::c_int) -> io::Result<libc::flock> {
    let mut lock =
        libc::flock { l_type: l_type as i16, l_whence: libc::SEEK_SET as i16, l_start: 0, l_len: 0, l_pid: 0 };
    // SAFETY: `lock` is a live, writable flock for the call; a bad fd is only an error.
    match unsafe { libc::fcntl(fd, cmd, &mut lock) } {
        -1 => Err(io::Error::last_os_error()),
        _ => Ok(lock),
    }
}

/// A host directory of root's, readable by everyone, with one file; removed on drop.
struct HostTree(PathBuf);

impl HostTree {
    fn new() -> HostTree {
        let dir = PathBuf::from("/tmp").join(unique_name("lockdown-locks"));
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("shared"), "a file host programs lock for writing\n").unwrap();
        for (path, mode) in [(dir.clone(), 0o755), (dir.join("shared"), 0o644)] {
            fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
        }
        HostTree(dir)
    }
}

impl Drop for HostTree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A read lock the sandbox takes on a host file it may read (a tree, and a single file,
/// POSIX and open-file-description locks) lands on the private root's own inode: a host
/// writer's lock on the same file is granted while the sandbox holds it. In its
/// workspace, locks work as SQLite needs them: a write lock conflicts with another open
/// file description's, `F_OFD_GETLK` reports it, and unlocking frees it.
fn apply_private_root_keeps_record_locks_private(caller: Caller) {
    let ws = Workspace::new(caller.sandbox_identity());
    let (tree, single) = (HostTree::new(), HostTree::new());
    let mut policy = realistic_policy(caller, &ws);
    policy.workspace_quota = Some(lockdown::WorkspaceQuota { path: ws.root.clone(), bytes: 4 * MIB });
    policy.private_root = true;
    policy.read_only.extend([tree.0.clone(), single.0.join("shared")]);
    policy.keep_fds_below = 4;
    let filters = SeccompFilters::build(policy.seccomp_profile()).unwrap();
    let parent = this_pid();
    let (host, sandbox_end) = UnixStream::pair().unwrap();
    let sync_fd = sandbox_end.as_raw_fd();
    let (tree_file, single_file, root) = (tree.0.join("shared"), single.0.join("shared"), ws.root.clone());
    let child = spawn(caller, move || {
        // SAFETY: in the forked child, fd 3 is free to take (the lockdown keeps fds below 4)
        // and `sync_fd` is the socket the parent made before the fork.
        expect_ok("dup2 to 3", unsafe { libc::dup2(sync_fd, 3) }.into())?;
        check_eq("private_root reported", apply(&policy, &filters, parent)?.private_root, true)?;
        let posix = io_ok("open the tree's file", fs::File::open(&tree_file))?;
        io_ok("F_SETLK F_RDLCK on the tree's file", record_lock(posix.as_raw_fd(), libc::F_SETLK, libc::F_RDLCK))?;
        let ofd = io_ok("open the single file", fs::File::open(&single_file))?;
        let held = record_lock(ofd.as_raw_fd(), libc::F_OFD_SETLKW, libc::F_RDLCK);
        io_ok("F_OFD_SETLKW F_RDLCK on the single file", held)?;
        // Holding both: the host tries its write locks now.
        // SAFETY: fd 3 is the socket dup2'd above, owned by nothing else in this child.
        let mut sync = unsafe { <UnixStream as std::os::fd::FromRawFd>::from_raw_fd(3) };
        io_ok("tell the host", sync.write_all(b"L"))?;
        let mut answer = [0u8; 1];
        io_ok("wait for the host", std::io::Read::read_exact(&mut sync, &mut answer))?;
        check_eq("the host's write locks", answer[0], b'G')?;
        // SQLite in the workspace.
        let db = root.join("db");
        io_ok("create the database", fs::write(&db, "pages"))?;
        let open = || fs::OpenOptions::new().read(true).write(true).open(&db);
        let (one, two) = (io_ok("open one", open())?, io_ok("open two", open())?);
        io_ok("write lock", record_lock(one.as_raw_fd(), libc::F_OFD_SETLK, libc::F_WRLCK))?;
        let busy = record_lock(two.as_raw_fd(), libc::F_OFD_SETLK, libc::F_RDLCK);
        check_eq(
            "a second reader while it is held",
            busy.map(drop).map_err(|e| e.raw_os_error()),
            Err(Some(libc::EAGAIN)),
        )?;
        let seen = io_ok("F_OFD_GETLK", record_lock(two.as_raw_fd(), libc::F_OFD_GETLK, libc::F_RDLCK))?;
        check_eq("the lock F_OFD_GETLK reports", seen.l_type, libc::F_WRLCK as i16)?;
        io_ok("unlock", record_lock(one.as_raw_fd(), libc::F_OFD_SETLK, libc::F_UNLCK))?;
        io_ok("the second reader after the unlock", record_lock(two.as_raw_fd(), libc::F_OFD_SETLK, libc::F_RDLCK))?;
        io_ok("a POSIX read lock beside it", record_lock(one.as_raw_fd(), libc::F_SETLK, libc::F_RDLCK)).map(drop)
    });
    drop(sandbox_end);
    let mut host = host;
    let mut ready = [0u8; 1];
    let told = std::io::Read::read_exact(&mut host, &mut ready);
    let mut granted = Vec::new();
    if told.is_ok() {
        for file in [tree.0.join("shared"), single.0.join("shared")] {
            // The POSIX lock first: closing `writer` releases it even if a fork of another
            // test's thread holds a copy of the fd (POSIX locks are the process's, never
            // inherited), whereas an OFD lock lives as long as any copy of its open file.
            // Taken second, a leaked OFD write lock made this process's own POSIX attempt
            // fail with EAGAIN (seen once in CI: the sandbox was not involved).
            for cmd in [libc::F_SETLK, libc::F_OFD_SETLK] {
                // A fresh open file each time, closed after: the host's own locks go with it.
                let writer = fs::OpenOptions::new().read(true).write(true).open(&file).unwrap();
                granted.push((
                    file.clone(),
                    cmd,
                    record_lock(writer.as_raw_fd(), cmd, libc::F_WRLCK).map(drop).map_err(|e| e.to_string()),
                ));
            }
        }
        let all = granted.iter().all(|(_, _, r)| r.is_ok());
        host.write_all(if all { b"G" } else { b"B" }).unwrap();
    }
    let outcome = child.wait();
    assert!(told.is_ok(), "the sandbox never held its locks: {outcome:?}");
    assert!(
        granted.iter().all(|(_, _, r)| r.is_ok()),
        "host write locks refused while the sandbox read-locks: {granted:?}"
    );
    assert_eq!(outcome, Outcome::Passed);
}

/// Without a private root the host's own inodes are the sandbox's: record locks are
/// refused (`ENOLCK`), and so are by-path `chmod` and `utimensat` (`EPERM`), even in the
/// workspace; the fd forms still work.
fn apply_without_private_root_refuses_record_locks_and_by_path_metadata(caller: Caller) {
    let ws = Workspace::new(caller.sandbox_identity());
    let tree = HostTree::new();
    let mut policy = realistic_policy(caller, &ws);
    policy.read_only.push(tree.0.clone());
    let filters = SeccompFilters::build(policy.seccomp_profile()).unwrap();
    let parent = this_pid();
    let (tree_file, mine) = (tree.0.join("shared"), ws.rw().join("mine"));
    let outcome = run(caller, move || {
        check_eq("private_root reported", apply(&policy, &filters, parent)?.private_root, false)?;
        let host = io_ok("open the tree's file", fs::File::open(&tree_file))?;
        for cmd in [libc::F_SETLK, libc::F_OFD_SETLK, libc::F_GETLK] {
            let got = record_lock(host.as_raw_fd(), cmd, libc::F_RDLCK).map(drop);
            expect_io_errno(&format!("fcntl {cmd} on a host file"), got, libc::ENOLCK)?;
        }
        io_ok("create a file", fs::write(&mine, "x"))?;
        let path = std::ffi::CString::new(mine.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `path` is a NUL-terminated string that outlives both calls; a null times
        // pointer means "now".
        expect_errno("chmod", unsafe { libc::chmod(path.as_ptr(), 0o600) }.into(), libc::EPERM)?;
        let now = unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), std::ptr::null(), 0) };
        expect_errno("utimensat by path", now.into(), libc::EPERM)?;
        let file = io_ok("open it", fs::File::open(&mine))?;
        // SAFETY: `file` is open for the call.
        expect_ok("fchmod", unsafe { libc::fchmod(file.as_raw_fd(), 0o600) }.into()).map(drop)
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// Without a report socket a violation after `apply` kills with SIGSYS.
fn apply_full_policy_kills_violations(caller: Caller) {
    let ws = Workspace::new(caller.sandbox_identity());
    let policy = realistic_policy(caller, &ws);
    let filters = SeccompFilters::build(policy.seccomp_profile()).unwrap();
    let parent = this_pid();
    let outcome = run(caller, move || {
        apply(&policy, &filters, parent)?;
        let rc = unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) };
        Err(format!("ptrace(PTRACE_TRACEME) returned {rc} ({})", errno_name(errno())))
    });
    assert_eq!(outcome, Outcome::Signaled(libc::SIGSYS));
}

/// `violation_fd` (kept open by `keep_fds_below`) carries the listener to the supervisor.
fn apply_reports_violations_over_violation_fd(caller: Caller) {
    let ws = Workspace::new(caller.sandbox_identity());
    let mut policy = realistic_policy(caller, &ws);
    policy.keep_fds_below = 4;
    policy.violation_fd = Some(3);
    let filters = SeccompFilters::build(policy.seccomp_profile()).unwrap();
    let parent = this_pid();
    let (supervisor, sandbox_end) = UnixStream::pair().unwrap();
    let report_fd = sandbox_end.as_raw_fd();
    let child = spawn(caller, move || {
        expect_ok("dup2 to 3", unsafe { libc::dup2(report_fd, 3) }.into())?;
        let applied = apply(&policy, &filters, parent)?;
        check_eq("Applied", applied, expected_applied(caller))?;
        expect_errno("unshare(CLONE_NEWNET)", unsafe { libc::unshare(libc::CLONE_NEWNET) }.into(), libc::EPERM)
    });
    drop(sandbox_end);
    let listener = match receive_fd(&supervisor) {
        Ok(fd) => fd,
        Err(e) => panic!("no seccomp listener received ({e}); the child: {:?}", child.wait()),
    };
    deny_one_unshare(listener, child.pid);
    unsafe { libc::close(listener) };
    assert_eq!(child.wait(), Outcome::Passed);
}

/// Network by proxy: the supervisor receives the listener (tag `N`) before the seccomp
/// listener, and accepts there what the sandbox connects to 127.0.0.1:PORT; the sandbox
/// holds no listener, cannot connect to another port (Landlock), bind (seccomp), or
/// reach the host's 127.0.0.1 (its own network namespace).
fn apply_network_by_proxy_hands_its_listener_over_and_reaches_nothing_else(caller: Caller) {
    let ws = Workspace::new(caller.sandbox_identity());
    let mut policy = realistic_policy(caller, &ws);
    policy.keep_fds_below = 4;
    policy.violation_fd = Some(3);
    policy.network = true;
    let filters = SeccompFilters::build(policy.seccomp_profile()).unwrap();
    let parent = this_pid();
    let (_host_listener, host_addr) = tcp_listener();
    let (supervisor, sandbox_end) = UnixStream::pair().unwrap();
    let report_fd = sandbox_end.as_raw_fd();
    let child = spawn(caller, move || {
        expect_ok("dup2 to 3", unsafe { libc::dup2(report_fd, 3) }.into())?;
        let applied = apply(&policy, &filters, parent)?;
        let port = applied.proxy_port.ok_or("Applied::proxy_port is None")?;
        check_eq("Applied", applied, Applied { proxy_port: Some(port), ..expected_applied(caller) })?;
        // Only fds 0..=3 are open: the listener went to the supervisor.
        for fd in 4..64 {
            expect_errno(
                &format!("fcntl({fd}, F_GETFD)"),
                unsafe { libc::fcntl(fd, libc::F_GETFD) }.into(),
                libc::EBADF,
            )?;
        }
        let mut proxy = io_ok("connect to the proxy's port", TcpStream::connect(("127.0.0.1", port)))?;
        io_ok("write to the proxy", std::io::Write::write_all(&mut proxy, b"CONNECT"))?;
        let other = if port == 65535 { port - 1 } else { port + 1 };
        expect_io_errno("connect to another port", TcpStream::connect(("127.0.0.1", other)), libc::EACCES)?;
        let host = TcpStream::connect(("127.0.0.1", host_addr.port()));
        if host_addr.port() != port {
            expect_io_errno("connect to the host's listener's port", host, libc::EACCES)?;
        }
        expect_io_errno("bind", TcpListener::bind("127.0.0.1:0"), libc::EPERM)
    });
    drop(sandbox_end);
    let (Ok(listener), Ok(seccomp_listener)) = (receive_fd(&supervisor), receive_fd(&supervisor)) else {
        panic!("the proxy listener and the seccomp listener were not both received; the child: {:?}", child.wait())
    };
    // SAFETY: the fd was just received and nothing else owns it.
    let listener = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(listener) };
    let listener = TcpListener::from(listener);
    let (mut accepted, peer) = listener.accept().unwrap();
    assert!(peer.ip().is_loopback(), "{peer}");
    let mut greeting = [0u8; 7];
    std::io::Read::read_exact(&mut accepted, &mut greeting).unwrap();
    assert_eq!(&greeting, b"CONNECT");
    assert_eq!(child.wait(), Outcome::Passed);
    unsafe { libc::close(seccomp_listener) };
}

/// Without a network namespace the network by proxy is refused (the sandbox would share
/// the host's network): by the policy's check when namespaces are off.
#[test]
fn network_by_proxy_without_namespaces_is_refused() {
    let policy =
        Policy { network: true, namespaces: false, violation_fd: Some(3), keep_fds_below: 4, ..Policy::default() };
    let error = policy.validate().unwrap_err().to_string();
    assert!(error.contains("network allowlist needs a network namespace"), "{error}");
}

/// Learning mode: the supervisor hears of each file call with its path, and lets it go
/// on; going on grants nothing (Landlock still refuses a file outside the policy), and a
/// forbidden call is refused with `EPERM` instead of ending the process. Started by a
/// user, the process stays dumpable (that user's supervisor reads the paths from its
/// memory).
fn apply_in_learning_mode_reports_file_calls_and_continuing_grants_nothing(caller: Caller) {
    let ws = Workspace::new(caller.sandbox_identity());
    let secret = PathBuf::from("/tmp").join(unique_name("lockdown-learning-secret"));
    fs::write(&secret, "not for the sandbox\n").unwrap();
    fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let mut policy = realistic_policy(caller, &ws);
    policy.keep_fds_below = 4;
    policy.violation_fd = Some(3);
    policy.learning = true;
    let filters = SeccompFilters::build(policy.seccomp_profile()).unwrap();
    let parent = this_pid();
    let (supervisor, sandbox_end) = UnixStream::pair().unwrap();
    let report_fd = sandbox_end.as_raw_fd();
    let (child_policy, secret_c, created) = (policy.clone(), secret.clone(), ws.rw().join("created"));
    let created_c = created.clone();
    let child = spawn(caller, move || {
        // SAFETY: both fds are open in this child (the socket end is inherited).
        expect_ok("dup2 to 3", unsafe { libc::dup2(report_fd, 3) }.into())?;
        let applied = apply(&child_policy, &filters, parent)?;
        check_eq("Applied::learning", applied.learning, true)?;
        // As root the identity switch already cleared it, and root's supervisor needs none.
        check_eq(
            "dumpable",
            prctl_get("PR_GET_DUMPABLE", libc::PR_GET_DUMPABLE)?,
            if caller == Caller::Root { 0 } else { 1 },
        )?;
        expect_io_errno("open the secret", fs::File::open(&secret_c), libc::EACCES)?;
        io_ok("create in the workspace", fs::write(&created_c, "made\n"))?;
        // SAFETY: unshare takes flags only; seccomp answers it before the kernel runs it.
        expect_errno("unshare(CLONE_NEWNET)", unsafe { libc::unshare(libc::CLONE_NEWNET) }.into(), libc::EPERM)
    });
    drop(sandbox_end);
    let listener = match receive_fd(&supervisor) {
        Ok(fd) => fd,
        Err(e) => panic!("no seccomp listener received ({e}); the child: {:?}", child.wait()),
    };
    // A notification whose caller died meanwhile is gone (ENOENT); anything else is a bug.
    let answered = |result: io::Result<()>| match result {
        Err(e) if e.raw_os_error() != Some(libc::ENOENT) => panic!("answering a notification: {e}"),
        _ => {}
    };
    // Answer as the supervisor does until every process under the filter is gone.
    let (mut seen, mut refused_calls) = (Vec::new(), Vec::new());
    loop {
        let mut poll = libc::pollfd { fd: listener, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, for the duration of the call.
        assert_eq!(unsafe { libc::poll(&mut poll, 1, 10_000) }, 1, "the child went quiet without exiting");
        if poll.revents & libc::POLLIN == 0 {
            break;
        }
        let n = match seccomp::receive_notification(listener) {
            Ok(n) => n,
            // Its caller died before we looked.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(e) => panic!("receiving a notification: {e}"),
        };
        if lockdown::observe::is_observed(n.syscall) {
            if let Some(call) = lockdown::observe::read_observed_call(&n).expect("the path of a pending call") {
                seen.push((call.path.clone(), call.access, policy.grants(&call.path, call.access)));
            }
            answered(seccomp::continue_notification(listener, n.id));
        } else {
            refused_calls.push(seccomp::syscall_name(n.syscall).unwrap_or("unknown"));
            answered(seccomp::deny_notification(listener, n.id));
        }
    }
    // SAFETY: closing the listener we received and own.
    unsafe { libc::close(listener) };
    assert_eq!(child.wait(), Outcome::Passed);
    use lockdown::observe::FileAccess;
    assert!(seen.contains(&(secret.clone(), FileAccess::Read, false)), "the refused read was reported: {seen:?}");
    assert!(seen.contains(&(created.clone(), FileAccess::Write, true)), "the granted write was reported: {seen:?}");
    assert_eq!(refused_calls, vec!["unshare"]);
    assert_eq!(fs::read_to_string(&created).unwrap(), "made\n");
    fs::remove_file(&secret).unwrap();
}

/// Root without `run_as` is refused before anything changes.
#[test]
fn apply_refuses_root_without_run_as() {
    let ws = Workspace::new(RUN_AS);
    let policy = Policy { run_as: None, ..realistic_policy(Caller::Root, &ws) };
    let filters = SeccompFilters::build(policy.seccomp_profile()).unwrap();
    let parent = this_pid();
    let outcome = run(Caller::Root, move || match lockdown::apply(&policy, &filters, parent) {
        Err(LockdownError::Policy(PolicyError::RootIdentity)) => {
            // Refused before any step: still root, still in the harness's group.
            check_eq("ids", ids()?, ([0; 3], [0; 3]))?;
            check_eq("no_new_privs", prctl_get("PR_GET_NO_NEW_PRIVS", libc::PR_GET_NO_NEW_PRIVS)?, 0)
        }
        other => Err(format!("apply as root without run_as: {other:?}, expected Policy(RootIdentity)")),
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// `run_as` naming uid 0 is refused too.
#[test]
fn apply_refuses_run_as_root() {
    let ws = Workspace::new(RUN_AS);
    let policy = Policy { run_as: Some(Identity { uid: 0, gid: RUN_AS.gid }), ..realistic_policy(Caller::Root, &ws) };
    let filters = SeccompFilters::build(policy.seccomp_profile()).unwrap();
    let parent = this_pid();
    let outcome = run(Caller::Root, move || match lockdown::apply(&policy, &filters, parent) {
        Err(LockdownError::Policy(PolicyError::RootIdentity)) => Ok(()),
        other => Err(format!("apply with run_as uid 0: {other:?}, expected Policy(RootIdentity)")),
    });
    assert_eq!(outcome, Outcome::Passed);
}

/// A `violation_fd` at or above `keep_fds_below` would be closed in step 1, so the
/// listener could not be sent: `validate` refuses such a policy before anything runs.
#[test]
fn policy_with_violation_fd_not_kept_is_refused() {
    for violation_fd in [3, 10] {
        let ws = Workspace::new(RUN_AS);
        let mut policy = realistic_policy(Caller::Root, &ws);
        policy.keep_fds_below = 3;
        policy.violation_fd = Some(violation_fd);
        match policy.validate() {
            Err(PolicyError::ViolationFdNotKept { fd, keep_fds_below: 3 }) => assert_eq!(fd, violation_fd),
            other => panic!("violation_fd {violation_fd}: {other:?}, expected ViolationFdNotKept"),
        }
    }
}
