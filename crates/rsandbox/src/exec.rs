//! `rsandbox exec`: the same lockdown for any program. It may execute itself only, once:
//! Landlock's execute right covers the program and its ELF interpreter, and seccomp
//! reports every exec, of which the launcher's own is the only one let through (see
//! `lockdown::command`); any other is a violation that ends the program.

use crate::child::signal_name;
use crate::config::EngineConfig;
use crate::errors::{EngineError, InputError};
use crate::options::EvalOptions;
use crate::r_policy::{base_environment, base_policy, with_interpreters};
use crate::result::{ExitStatus, Outcome, Usage};
use crate::workspace::{self, WorkspaceRoot};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How a sandboxed program ended.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ExecReport {
    /// `ok` (exit 0), `error` (other exit status) or the limit that ended it.
    pub outcome: Outcome,
    /// Exit code or signal.
    pub exit: ExitStatus,
    /// Resource use.
    pub usage: Usage,
    /// What happened, in words.
    pub description: String,
    /// The forbidden system call, when the outcome is `violation`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub violation: Option<String>,
}

/// Find `program` on the sandbox's PATH (when it has no slash) and canonicalise it.
pub fn resolve_program(program: &str) -> Result<PathBuf, EngineError> {
    let candidates: Vec<PathBuf> = if program.contains('/') {
        vec![PathBuf::from(program)]
    } else {
        ["/usr/local/bin", "/usr/bin", "/bin"].iter().map(|d| Path::new(d).join(program)).collect()
    };
    candidates.iter().find(|p| p.is_file()).and_then(|p| p.canonicalize().ok()).ok_or_else(|| {
        let where_ = if program.contains('/') { String::new() } else { " in /usr/local/bin, /usr/bin or /bin".into() };
        EngineError::Input(InputError::NoProgram { program: program.into(), where_ })
    })
}

/// Where the workspace's (empty) host directory goes when neither the caller nor
/// `TMPDIR` names a place: [`workspace::memory_parent`], only when the workspace is sure
/// to be the sandbox's own quota tmpfs (a disk quota, in namespaces, not best effort,
/// which could run without them); otherwise the engine's default, the temporary
/// directory, as before.
fn memory_parent(options: &EvalOptions, config: &EngineConfig) -> Option<PathBuf> {
    if options.disk.is_none() || !workspace::mount_points_may_live_in_memory(config) {
        return None;
    }
    workspace::memory_parent()
}

/// The empty network, IPC and UTS namespaces every `exec` as root joins, pinned in
/// `/run/rsandbox-ns` by the first (see [`lockdown::namespaces::PinnedNamespaces`]), for
/// a policy that would make its own and could share them as a zygote's children do:
/// namespaces on, not best effort (which may run without the seccomp and Landlock
/// scoping sharing relies on), no network by proxy (which needs one of its own), and
/// root able to make namespaces (a container's root without `CAP_SYS_ADMIN` becomes the
/// sandbox's user first, in a user namespace that may not join these). `None` when they
/// cannot be pinned or opened: the program then makes its own, as before, the same layer.
fn shared_empty_namespaces(policy: &lockdown::Policy) -> Option<lockdown::namespaces::PinnedNamespaces> {
    let may_share = rustix::process::geteuid().is_root()
        && policy.namespaces
        && !policy.best_effort
        && !policy.network
        && lockdown::privileges::can_create_namespaces().unwrap_or(false);
    if !may_share {
        return None;
    }
    let dir = workspace::pinned_namespaces_dir().ok()?;
    lockdown::namespaces::PinnedNamespaces::open_or_pin(&dir).ok()
}

/// Where the workspaces of the `exec`s that share pinned root templates lie: a template
/// holds its workspaces' parent directory, so every call's workspace is in this one. In
/// [`workspace::memory_parent`] when there is one (making and removing a directory there
/// costs a tenth of what it does on a disk), else beside the pins in `pin_dir`. Anyone
/// may make the name first in `/dev/shm`: then [`WorkspaceRoot::in_shared_dir`]
/// refuses it (not root's, or not 0700), and the call goes without a template.
fn exec_workspaces(pin_dir: &Path) -> PathBuf {
    workspace::memory_parent()
        .map_or_else(|| pin_dir.join("exec-workspaces"), |shm| shm.join("rsandbox-exec-workspaces"))
}

/// Where `exec` pins the private root it copies (see
/// [`lockdown::root_template::RootTemplate::open_or_pin`]), for the calls that may
/// share one, as a zygote's children share theirs: as root able to make namespaces (the
/// template is root's), with namespaces and a disk quota (the private root rides on the
/// quota's tmpfs), not best effort (which may go without the mount namespace), and no
/// workspace directory of the caller's choosing (a template fits one workspace parent).
/// A template that cannot be pinned or opened costs nothing but time: the program then
/// builds its own root, the same layer.
fn root_template_dir(options: &EvalOptions, config: &EngineConfig) -> Option<PathBuf> {
    let may_share = rustix::process::geteuid().is_root()
        && config.namespaces
        && !config.best_effort
        && options.disk.is_some()
        && config.workspace_root.is_none()
        && lockdown::privileges::can_create_namespaces().unwrap_or(false);
    may_share.then(workspace::pinned_namespaces_dir).and_then(Result::ok)
}

/// Run `program args…` under the lockdown and wait for it. Call from a single-threaded
/// process (the CLI): the child allocates between fork and exec.
pub fn exec(
    program: &str,
    args: &[String],
    options: &EvalOptions,
    config: &EngineConfig,
) -> Result<ExecReport, EngineError> {
    options.validate()?;
    let path = resolve_program(program)?;
    let executable = with_interpreters(std::slice::from_ref(&path))?;
    // A template holds its workspaces' parent: every call's workspace goes in one
    // shared directory, or (when that is refused) no template is used and the call has
    // a root directory of its own, as an engine does.
    let shared = root_template_dir(options, config).and_then(|pin_dir| {
        WorkspaceRoot::in_shared_dir(exec_workspaces(&pin_dir), config.uid_base, u64::MAX).ok().map(|r| (r, pin_dir))
    });
    let (root, pin_dir) = match shared {
        Some((root, pin_dir)) => (root, Some(pin_dir)),
        None => {
            let parent = config.workspace_root.clone().or_else(|| memory_parent(options, config));
            (WorkspaceRoot::create(parent.as_deref(), config.uid_base, u64::MAX)?, None)
        }
    };
    let root = root.with_fixed_identity(config.checked_identity()?);
    let workspace = root.workspace(options.disk.unwrap_or(0))?;
    let mut policy = base_policy(&workspace, options, config);
    policy.executable = executable;
    let template = pin_dir.and_then(|dir| lockdown::root_template::RootTemplate::open_or_pin(&dir, &policy).ok());
    let env = base_environment(&workspace);
    let mut argv = vec![program.to_string()];
    argv.extend(args.iter().cloned());
    let start = Instant::now();
    std::env::set_current_dir(workspace.path()).map_err(EngineError::io("enter the workspace"))?;
    let shared = shared_empty_namespaces(&policy);
    let spawned = lockdown::command::spawn(&policy, &path, &argv, &env, shared.as_ref(), template.as_ref())
        .map_err(|e| EngineError::Setup(e.to_string()))?;
    let waited = wait_with_deadline(&spawned, start + options.timeout)?;
    let usage = Usage {
        wall_ms: start.elapsed().as_millis() as u64,
        cpu_ms: waited.cpu_ms,
        max_rss_kb: waited.max_rss_kb,
        ..Usage::default()
    };
    std::env::set_current_dir("/").map_err(EngineError::io("leave the workspace"))?;
    Ok(report(waited, usage, options))
}

fn report(waited: Waited, usage: Usage, options: &EvalOptions) -> ExecReport {
    let Waited { exit, timed_out, violation, .. } = waited;
    let cpu_exhausted = options.cpu_seconds.is_some_and(|l| usage.cpu_ms >= l * 1000);
    let (outcome, description) = match (timed_out, exit.signal, exit.code) {
        _ if violation.is_some() => {
            let name = violation.as_deref().unwrap_or("unknown");
            (Outcome::Violation, format!("killed for a forbidden system call ({name})"))
        }
        (true, _, _) => (Outcome::Timeout, Outcome::past_time_limit("the program", options.timeout)),
        (_, Some(libc::SIGXCPU), _) => (Outcome::CpuLimit, limit_words(Outcome::CpuLimit)),
        (_, Some(libc::SIGKILL), _) if cpu_exhausted => (Outcome::CpuLimit, limit_words(Outcome::CpuLimit)),
        (_, Some(libc::SIGXFSZ), _) => (Outcome::FileSizeLimit, limit_words(Outcome::FileSizeLimit)),
        (_, Some(libc::SIGSYS), _) => (Outcome::Violation, "killed for a forbidden system call".into()),
        (_, Some(s), _) => (Outcome::Crashed, crash_words(s, options.memory)),
        (_, None, Some(0)) => (Outcome::Ok, "exited with status 0".into()),
        (_, None, Some(c)) => (Outcome::Error, format!("exited with status {c}")),
        (_, None, None) => (Outcome::Crashed, "ended without a status".into()),
    };
    ExecReport { outcome, exit, usage, description, violation }
}

/// The words of a crash by signal `signal`. Under a memory limit a crash is most often
/// that limit: the limit is on the program's address space (`RLIMIT_AS`), and a program
/// whose loader cannot map its code, or whose stack cannot grow, is killed by `SIGSEGV`
/// (or `SIGBUS`, or aborts) before it can say so. The kernel does not tell which, so the
/// words name the limit as the likely cause rather than leave a bare signal.
fn crash_words(signal: i32, memory_limit: Option<u64>) -> String {
    let crashed = format!("killed by signal {signal} ({})", signal_name(signal));
    match memory_limit {
        Some(bytes) if [libc::SIGSEGV, libc::SIGBUS, libc::SIGABRT].contains(&signal) => format!(
            "{crashed}, under a memory limit of {}: a program that cannot map its code or grow its stack \
             ends this way, so the limit may be too small for it",
            bytesize::ByteSize::b(bytes).display().iec()
        ),
        _ => crashed,
    }
}

/// The words of a limit outcome (`Outcome::limit_reached`), owned.
fn limit_words(outcome: Outcome) -> String {
    outcome.limit_reached().unwrap_or("a limit was reached").to_string()
}

/// How the program ended, as the wait saw it.
struct Waited {
    exit: ExitStatus,
    cpu_ms: u64,
    max_rss_kb: u64,
    timed_out: bool,
    /// The first forbidden call reported.
    violation: Option<String>,
}

/// Wait for the program until `deadline`, watching its violation listener; kill its
/// whole process group at the deadline, at a violation, and after it exits (orphans
/// die with it).
fn wait_with_deadline(spawned: &lockdown::command::Spawned, deadline: Instant) -> Result<Waited, EngineError> {
    let pid = spawned.pid;
    let listener = spawned.violations.as_raw_fd();
    let group = rustix::process::Pid::from_raw(pid)
        .ok_or_else(|| EngineError::io("open a pidfd")(io::Error::other("no pid")))?;
    // Our own, unreaped child: the pid cannot have been reused.
    let pidfd = rustix::process::pidfd_open(group, rustix::process::PidfdFlags::empty())
        .map_err(|e| EngineError::io("open a pidfd")(e.into()))?;
    // The child leads its own process group; the leader is a zombie until reaped, so its
    // pid names the group until then. A group already gone needs nothing.
    let kill_group = || {
        rustix::process::kill_process_group(group, rustix::process::Signal::KILL).ok();
    };
    let mut timed_out = false;
    let mut violation = None;
    let mut listening = true;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut fds = vec![rustix::event::PollFd::new(&pidfd, rustix::event::PollFlags::IN)];
        if listening {
            fds.push(rustix::event::PollFd::new(&spawned.violations, rustix::event::PollFlags::IN));
        }
        let timeout = rustix::event::Timespec { tv_sec: left.as_secs() as i64, tv_nsec: left.subsec_nanos() as i64 };
        let n = match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(n) => n,
            // Nothing is ready; the loop looks at the deadline again.
            Err(rustix::io::Errno::INTR) => continue,
            // Fail closed: a program that cannot be watched is ended, not waited for in
            // a loop that cannot see its exit.
            Err(e) => {
                kill_group();
                return Err(EngineError::io("wait for the sandboxed program")(e.into()));
            }
        };
        let exited = !fds[0].revents().is_empty();
        let reported = fds.get(1).map_or(rustix::event::PollFlags::empty(), |f| f.revents());
        if exited {
            break;
        }
        if reported.contains(rustix::event::PollFlags::IN) {
            match lockdown::seccomp::receive_notification(listener) {
                Ok(call) => {
                    violation
                        .get_or_insert(lockdown::seccomp::syscall_name(call.syscall).unwrap_or("unknown").to_string());
                    kill_group();
                    // Killed anyway; the refusal only unblocks the caller sooner.
                    let _ = lockdown::seccomp::deny_notification(listener, call.id);
                }
                // Its caller died first: that report is gone, the listener stays.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) => {
                    // Fail closed: a program whose violations cannot be seen is ended.
                    kill_group();
                    violation.get_or_insert(format!("unknown (the violation listener failed: {e})"));
                }
            }
        } else if !reported.is_empty() {
            listening = false; // every process under the filter is gone
        }
        if n == 0 && !timed_out {
            timed_out = true;
            kill_group();
        }
    }
    kill_group();
    // libc: rustix's waitpid does not return the rusage (wait4's) that the report needs.
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: reaping our own exited child.
    if unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } != pid {
        return Err(EngineError::io("wait for the sandboxed program")(io::Error::last_os_error()));
    }
    let ms = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
    let exit = ExitStatus {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
    };
    Ok(Waited {
        exit,
        cpu_ms: ms(usage.ru_utime) + ms(usage.ru_stime),
        max_rss_kb: usage.ru_maxrss as u64,
        timed_out,
        violation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(signal: Option<i32>, timed_out: bool) -> ExecReport {
        ended_with_memory(signal, timed_out, None)
    }

    fn ended_with_memory(signal: Option<i32>, timed_out: bool, memory: Option<u64>) -> ExecReport {
        let exit = ExitStatus { code: None, signal };
        let waited = Waited { exit, cpu_ms: 0, max_rss_kb: 0, timed_out, violation: None };
        let options = EvalOptions { timeout: std::time::Duration::from_secs(2), memory, ..EvalOptions::default() };
        report(waited, Usage::default(), &options)
    }

    /// A crash under a memory limit names the limit as its likely cause; one without a
    /// limit, or by a signal no lack of memory sends, stays a bare crash.
    #[test]
    fn a_crash_under_a_memory_limit_names_the_limit() {
        let r = ended_with_memory(Some(libc::SIGSEGV), false, Some(100 << 10));
        assert_eq!(r.outcome, Outcome::Crashed);
        assert_eq!(
            r.description,
            "killed by signal 11 (SIGSEGV), under a memory limit of 100.0 KiB: a program that cannot map its code \
             or grow its stack ends this way, so the limit may be too small for it"
        );
        let r = ended_with_memory(Some(libc::SIGSEGV), false, None);
        assert_eq!(r.description, "killed by signal 11 (SIGSEGV)");
        let r = ended_with_memory(Some(libc::SIGTERM), false, Some(100 << 10));
        assert_eq!(r.description, "killed by signal 15 (SIGTERM)");
    }

    /// A program's limits are said in the words every front uses for R code.
    #[test]
    fn a_program_reaching_a_limit_is_said_as_every_front_says_it() {
        let r = ended(Some(libc::SIGXFSZ), false);
        assert_eq!(
            (r.outcome, r.description.as_str()),
            (Outcome::FileSizeLimit, "a file grew past the file size limit")
        );
        let r = ended(Some(libc::SIGXCPU), false);
        assert_eq!((r.outcome, r.description.as_str()), (Outcome::CpuLimit, "the CPU time limit was reached"));
        let r = ended(Some(libc::SIGKILL), true);
        assert_eq!(
            (r.outcome, r.description.as_str()),
            (Outcome::Timeout, "the program ran past its time limit of 2 s")
        );
    }
}
