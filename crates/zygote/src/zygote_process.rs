//! The zygote's own life: start R, then serve spawn requests and reap children.
//!
//! One thread, one poll loop over the supervisor channel and a signalfd for SIGCHLD.
//! The zygote is a child subreaper, so orphans of a sandbox come back here to be reaped;
//! when a sandbox child exits, its whole process group is killed before it is reaped
//! (the zombie leader keeps the group id from being reused until then).

use crate::embedded_r::EmbeddedR;
use crate::or_exit;
use crate::sandbox_child;
use lockdown::root_template::RootTemplates;
use lockdown::{Policy, SeccompFilters, SeccompProfile};
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use wire::messages::{ToolStub, ZygoteEvent, ZygoteRequest};
use wire::names::is_package_name;
use wire::zygote_link::{spawn_fds, Ready, Received, SupervisorLink};

/// Start R, load the preloads, and describe the result.
pub fn start(preload: &[String], warm: bool) -> Result<(EmbeddedR, Ready), String> {
    if let Some(bad) = preload.iter().find(|p| !is_package_name(p)) {
        return Err(format!("invalid package name {bad:?}"));
    }
    let r = EmbeddedR::start().map_err(|e| format!("failed to start R: {e}"))?;
    crate::tool_calls::register_native_routines();
    r.eval_strings(".rsb_resolve_routines()").map_err(|e| format!("failed to find the host's routines: {e}"))?;
    let list = preload.iter().map(|p| format!("\"{p}\"")).collect::<Vec<_>>().join(", ");
    let warm = if warm { "TRUE" } else { "FALSE" };
    r.eval_strings(&format!("rsandbox_prepare_zygote(c({list}), warm = {warm})"))
        .map_err(|e| format!("failed to prepare the zygote: {e}"))?;
    let one = |code: &str| r.eval_strings(code).map_err(|e| e.to_string());
    let ready = Ready {
        r_version: one("R.version.string")?.join(""),
        r_home: one("R.home()")?.join("").into(),
        library_paths: one(".libPaths()")?.into_iter().map(Into::into).collect(),
        r_directories: crate::r_directories::VARIABLES
            .iter()
            .filter_map(|name| std::env::var_os(name).map(|dir| (name.to_string(), dir.into())))
            .collect(),
        preloaded: preload.to_vec(),
    };
    Ok((r, ready))
}

struct Child {
    req: u64,
}

/// Serve until the supervisor closes the channel; then kill every child and exit.
pub fn serve(link: &SupervisorLink, r: &EmbeddedR) -> ! {
    let sigchld = match block_sigchld_into_signalfd() {
        Ok(fd) => fd,
        Err(e) => fatal(link, &format!("failed to set up SIGCHLD handling: {e}")),
    };
    // SAFETY: integer-only prctl.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        fatal(link, &format!("failed to become a subreaper: {}", io::Error::last_os_error()));
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        // Once, before the first fork: every root child inherits an empty bounding set
        // instead of emptying its own (see the function). A refusal (a container without
        // CAP_SETPCAP) leaves each child emptying its own, as before, and failing as it would.
        let _ = lockdown::privileges::empty_bounding_set();
    }
    let mut filters: HashMap<SeccompProfile, SeccompFilters> = HashMap::new();
    let mut roots = RootTemplates::default();
    let mut children: HashMap<libc::pid_t, Child> = HashMap::new();
    loop {
        let mut fds = [
            libc::pollfd { fd: link.as_fd().as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: sigchld.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: `fds` is a valid array of two pollfd structures.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            continue; // EINTR
        }
        if fds[1].revents != 0 {
            drain_signalfd(&sigchld);
            reap(link, &mut children);
        }
        if fds[0].revents != 0 {
            match link.next_request() {
                Ok(Some(received)) => handle_request(link, r, (&mut filters, &mut roots), &mut children, received),
                Ok(None) => shutdown(&children),
                // A request we cannot parse has no id to answer; the supervisor never
                // sends one, so it is not the supervisor we know: stop everything.
                Err(e) => {
                    eprintln!("rsandbox-zygote: {e}");
                    shutdown(&children)
                }
            }
        }
    }
}

fn handle_request(
    link: &SupervisorLink,
    r: &EmbeddedR,
    (filters, roots): (&mut HashMap<SeccompProfile, SeccompFilters>, &mut RootTemplates),
    children: &mut HashMap<libc::pid_t, Child>,
    Received { request, fds: passed, fds_lost }: Received,
) {
    let ZygoteRequest::Spawn { req, policy, workspace, env, tools, warm_up } = request;
    let report = |children: &HashMap<libc::pid_t, Child>, error: String, capacity: bool| {
        if link.report_spawn_failed(req, error, capacity).is_err() {
            shutdown(children);
        }
    };
    let failed = |children: &HashMap<libc::pid_t, Child>, error: String| report(children, error, false);
    if fds_lost {
        let error = "the zygote had no descriptor free for the request's channels (its open-file limit)";
        return report(children, error.into(), true);
    }
    let fds = match spawn_fds(passed) {
        Ok(fds) => fds,
        Err(e) => return failed(children, e.to_string()),
    };
    // Everything the child will trust is checked here, before the fork: a child that
    // finds its policy wrong can only die, and a panic in it would unwind into a copy
    // of this loop.
    if let Err(e) = check_spawn(&policy, &workspace, &env, &tools) {
        return failed(children, format!("refused a spawn request: {e}"));
    }
    let profile = policy.seccomp_profile();
    if let std::collections::hash_map::Entry::Vacant(slot) = filters.entry(profile) {
        match SeccompFilters::build(profile) {
            Ok(f) => {
                slot.insert(f);
            }
            Err(e) => return failed(children, format!("failed to build the seccomp filter: {e}")),
        }
    }
    let filters = &filters[&profile];
    // SAFETY: geteuid cannot fail.
    let as_root = unsafe { libc::geteuid() } == 0;
    if policy.namespaces && !policy.best_effort && as_root {
        // Once: the zygote moves into empty network, IPC and UTS namespaces that every
        // child from now on shares instead of making its own (see the function; a child
        // with the network by proxy still makes its own network namespace). A refusal
        // leaves each child making its own, as before: nothing is weaker for it.
        let _ = lockdown::namespaces::share_empty_namespaces();
    }
    // Built once per root shape (and again after a while), so the child copies its
    // private root instead of building it; without one it builds its own, as before.
    let root = roots.for_policy(&policy);
    // SAFETY: getpid cannot fail.
    let zygote_pid = unsafe { libc::getpid() };
    // Buffered stdio would otherwise be written twice, once by each process.
    // SAFETY: fflush(NULL) flushes all open output streams.
    unsafe { libc::fflush(std::ptr::null_mut()) };
    // SAFETY: the zygote is single-threaded (R's main thread only), so the child is a
    // complete copy that may run any code, R included.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => {
            let error = io::Error::last_os_error();
            report(children, format!("the zygote could not fork: {}", fork_failure_words(&error)), is_capacity(&error))
        }
        0 => {
            let spec =
                sandbox_child::ChildSpec { policy: &policy, workspace: &workspace, env: &env, tools: &tools, warm_up };
            sandbox_child::run(r, spec, fds, (filters, root), zygote_pid)
        }
        pid => {
            drop(fds);
            // Also done by the child itself; doing it on both sides closes the race in
            // which the supervisor signals the group before the child has created it.
            // SAFETY: integer-only call on our own child.
            unsafe { libc::setpgid(pid, pid) };
            children.insert(pid, Child { req });
            match pidfd_open(pid) {
                Ok(pidfd) => {
                    if link.report_spawned(req, pid, pidfd.as_fd()).is_err() {
                        shutdown(children);
                    }
                }
                Err(e) => {
                    // SAFETY: killing our own, unreaped child.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                    report(children, format!("pidfd_open failed: {e}"), is_capacity(&e));
                }
            }
        }
    }
}

/// Reap everything that has exited. A tracked sandbox child gets its group killed first
/// and an `Exited` report; orphans that came to us as subreaper are just reaped.
fn reap(link: &SupervisorLink, children: &mut HashMap<libc::pid_t, Child>) {
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: peek (WNOWAIT) at any exited child, writing into `info`.
        let rc = unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
        // SAFETY: si_pid is valid to read after waitid filled `info` (0 when nothing exited).
        let pid = unsafe { info.si_pid() };
        if rc != 0 || pid == 0 {
            return;
        }
        let tracked = children.remove(&pid);
        if tracked.is_some() {
            // The leader is a zombie until reaped below, so -pid still names its group.
            // SAFETY: signalling a process group we created.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        let mut status = 0;
        // SAFETY: a zeroed rusage is a valid out-parameter.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: reaping a child we know has exited, with valid out-pointers.
        unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if let Some(child) = tracked {
            let ms = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
            let event = ZygoteEvent::Exited {
                req: child.req,
                code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
                signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
                cpu_ms: ms(usage.ru_utime) + ms(usage.ru_stime),
                max_rss_kb: usage.ru_maxrss as u64,
            };
            // The supervisor is gone (the idle children it pre-forked see their
            // channels close and exit first, so this is often how the zygote learns):
            // the children still running must die with it, not just the zygote.
            if link.report_exited(event).is_err() {
                shutdown(children);
            }
        }
    }
}

/// Kill every child's group and reap everything (orphans included: we are their
/// subreaper, and a container's init may not reap), then exit.
fn shutdown(children: &HashMap<libc::pid_t, Child>) -> ! {
    for pid in children.keys() {
        // SAFETY: signalling process groups we created.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while std::time::Instant::now() < deadline {
        // SAFETY: reaping any child; a null status pointer is allowed.
        match unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } {
            -1 => break, // ECHILD: nothing left
            0 => std::thread::sleep(std::time::Duration::from_millis(5)),
            _ => {}
        }
    }
    std::process::exit(0)
}

fn fatal(link: &SupervisorLink, error: &str) -> ! {
    // Exiting either way; a supervisor that is gone needs no report.
    or_exit(link.report_start_failed(error.to_string()));
    std::process::exit(1)
}

/// The checks a spawn request must pass before the zygote forks for it.
fn check_spawn(policy: &Policy, workspace: &Path, env: &[(String, String)], tools: &[ToolStub]) -> Result<(), String> {
    policy.validate().map_err(|e| format!("invalid policy: {e}"))?;
    if !workspace.is_absolute() || !workspace.is_dir() {
        return Err(format!("workspace {} is not an existing absolute directory", workspace.display()));
    }
    check_environment(env)?;
    sandbox_child::check_tools(tools)
}

/// Variables the child can set: a name without `=` or NUL, a value without NUL.
pub fn check_environment(env: &[(String, String)]) -> Result<(), String> {
    match env.iter().find(|(k, v)| k.is_empty() || k.contains(['=', '\0']) || v.contains('\0')) {
        Some((k, _)) => Err(format!("invalid environment variable {k:?}")),
        None => Ok(()),
    }
}

/// Whether a failed `fork` or `pidfd_open` is the machine's capacity (no process, memory
/// or descriptor free: the same request may succeed later) rather than a fault of it.
fn is_capacity(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EAGAIN | libc::ENOMEM | libc::EMFILE | libc::ENFILE))
}

/// A failed `fork` in an operator's words: which limit `EAGAIN` means.
fn fork_failure_words(error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(libc::EAGAIN) => format!(
            "{error}: the process limit is reached (this user's, ulimit -u; a container's or cgroup's pids limit; \
             or the system's pid_max)"
        ),
        _ => error.to_string(),
    }
}

fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: integer-only system call; on success it returns a new fd we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just created this fd for us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn block_sigchld_into_signalfd() -> io::Result<OwnedFd> {
    // SAFETY: sigset operations on locals, then sigprocmask/signalfd/sigaction with valid
    // pointers (a zeroed sigaction is valid storage, filled in before use).
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = OwnedFd::from_raw_fd(fd);
        // Exits only: the supervisor stops a session's R after every request and
        // continues it at the next, and each stop and continue would otherwise wake the
        // zygote (twice per request, on a CPU the request needs) for nothing to reap.
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        action.sa_flags = libc::SA_NOCLDSTOP;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    }
}

fn drain_signalfd(fd: &OwnedFd) {
    let mut buf = [0u8; std::mem::size_of::<libc::signalfd_siginfo>() * 16];
    // SAFETY: reading into a local buffer from a non-blocking fd we own.
    while unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fork refused for want of a process, memory or descriptor is capacity (the
    /// supervisor says `busy`), and `EAGAIN` names the limits that cause it; any other
    /// refusal is a failure of the request.
    #[test]
    fn a_fork_refused_for_want_of_a_process_is_capacity() {
        let again = io::Error::from_raw_os_error(libc::EAGAIN);
        assert!(is_capacity(&again));
        assert!(fork_failure_words(&again).contains("the process limit is reached (this user's, ulimit -u"));
        for errno in [libc::ENOMEM, libc::EMFILE, libc::ENFILE] {
            assert!(is_capacity(&io::Error::from_raw_os_error(errno)), "{errno}");
        }
        let refused = io::Error::from_raw_os_error(libc::EPERM);
        assert!(!is_capacity(&refused));
        assert_eq!(fork_failure_words(&refused), refused.to_string());
    }
}
