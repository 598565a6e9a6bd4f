//! One evaluation, supervisor side: give a fresh child its pipes, send the code, watch
//! it (deadline, output limit, violation reports), and turn what happened into an
//! [`EvalResult`] whose `outcome` names the reason a person understands.

use crate::channel::Channel;
use crate::errors::EngineError;
use crate::protocol::{write_frame, ChildReport, EvalRequest, FrameDecoder, ZygoteEvent, ZygoteRequest, MAX_FRAME};
use crate::result::*;
use crate::zygote::{Routed, Zygote};
use lockdown::Policy;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a child may take to be forked and report back.
const SPAWN_TIMEOUT: Duration = Duration::from_secs(20);
/// After the child exits, how long to wait for the zygote's report and for pipes to close.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Why the supervisor killed the child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KillReason {
    Timeout,
    OutputLimit,
    Violation,
}

/// Everything needed to run one evaluation.
pub struct EvalSpec<'a> {
    /// Lockdown policy for the child.
    pub policy: Policy,
    /// The child's workspace.
    pub workspace: &'a Path,
    /// The child's complete environment.
    pub env: Vec<(String, String)>,
    /// R code.
    pub code: &'a str,
    /// Wall-clock limit.
    pub timeout: Duration,
    /// stdout + stderr + result bytes allowed.
    pub max_output: u64,
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for two fds.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: fcntl on an fd we own.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn kill_via_pidfd(pidfd: &OwnedFd) {
    // SAFETY: signalling the process the pidfd refers to; no pointers besides a null info.
    // ESRCH (already gone) is the only expected failure and needs no action.
    unsafe { libc::syscall(libc::SYS_pidfd_send_signal, pidfd.as_raw_fd(), libc::SIGKILL, std::ptr::null::<u8>(), 0) };
}

/// A readable pipe end and what came out of it.
struct Stream {
    fd: Option<OwnedFd>,
    data: Vec<u8>,
}

impl Stream {
    fn new(fd: OwnedFd) -> io::Result<Stream> {
        set_nonblocking(&fd)?;
        Ok(Stream { fd: Some(fd), data: Vec::new() })
    }

    /// Read what is available; keeps at most `room` more bytes. Returns bytes read.
    fn pump(&mut self, room: usize) -> usize {
        let Some(fd) = &self.fd else { return 0 };
        let mut buf = [0u8; 65536];
        let mut total = 0;
        loop {
            // SAFETY: reading into a local buffer from a non-blocking fd we own.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                let n = n as usize;
                let keep = n.min(room.saturating_sub(total));
                self.data.extend_from_slice(&buf[..keep]);
                total += n;
                continue;
            }
            if n == 0 {
                self.fd = None;
            } else if io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock {
                self.fd = None;
            }
            return total;
        }
    }
}

/// The child's violation channel: first it delivers the seccomp listener, then the
/// listener delivers one notification per forbidden call.
struct ViolationWatch {
    channel: Option<Channel>,
    listener: Option<OwnedFd>,
    syscall: Option<i64>,
}

impl ViolationWatch {
    fn poll_fd(&self) -> i32 {
        match (&self.listener, &self.channel) {
            (Some(l), _) => l.as_raw_fd(),
            (None, Some(c)) => c.as_fd().as_raw_fd(),
            (None, None) => -1,
        }
    }

    /// Handle readiness; true when a violation was just reported.
    fn service(&mut self, revents: i16) -> bool {
        if let Some(listener) = &self.listener {
            if revents & libc::POLLIN == 0 {
                // POLLHUP alone: every process under the filter is gone.
                self.listener = None;
                return false;
            }
            return match lockdown::seccomp::receive_notification(listener.as_raw_fd()) {
                Ok(n) => {
                    // The caller is killed next; the refusal only unblocks it sooner.
                    lockdown::seccomp::deny_notification(listener.as_raw_fd(), n.id).ok();
                    self.syscall.get_or_insert(n.syscall);
                    true
                }
                // The caller died before we looked (ENOENT); nothing left to report.
                Err(_) => {
                    self.listener = None;
                    false
                }
            };
        }
        if let Some(channel) = &self.channel {
            match channel.recv() {
                Ok(Some((_, mut fds))) if fds.len() == 1 => self.listener = fds.pop(),
                _ => {}
            }
            self.channel = None;
        }
        false
    }
}

struct Exit {
    code: Option<i32>,
    signal: Option<i32>,
    cpu_ms: u64,
    max_rss_kb: u64,
}

/// Run one evaluation in a fresh child of `zygote`.
pub fn evaluate(zygote: &Zygote, spec: EvalSpec<'_>) -> Result<EvalResult, EngineError> {
    let start = Instant::now();
    let (out_r, out_w) = pipe().map_err(EngineError::io("create the stdout pipe"))?;
    let (err_r, err_w) = pipe().map_err(EngineError::io("create the stderr pipe"))?;
    let (viol_ours, viol_child) = Channel::pair().map_err(EngineError::io("create the violation channel"))?;
    let (ctl, ctl_child) = UnixStream::pair().map_err(EngineError::io("create the child channel"))?;
    let cpu_limit = spec.policy.limits.cpu_seconds;
    let (req, events) = zygote.spawn(
        |req| ZygoteRequest::Spawn { req, policy: spec.policy, workspace: spec.workspace.to_path_buf(), env: spec.env },
        &[ctl_child.as_fd(), out_w.as_fd(), err_w.as_fd(), viol_child.as_fd()],
    )?;
    drop((ctl_child, out_w, err_w, viol_child));
    let watch = ViolationWatch { channel: Some(viol_ours), listener: None, syscall: None };
    let result = supervise(&events, ctl, [out_r, err_r], watch, spec.code, start, spec.timeout, spec.max_output, cpu_limit);
    zygote.forget(req);
    result
}

#[allow(clippy::too_many_arguments)]
fn supervise(
    events: &Receiver<Routed>,
    ctl: UnixStream,
    [out_r, err_r]: [OwnedFd; 2],
    mut violations: ViolationWatch,
    code: &str,
    start: Instant,
    timeout: Duration,
    max_output: u64,
    cpu_limit: Option<u64>,
) -> Result<EvalResult, EngineError> {
    let pidfd = match events.recv_timeout(SPAWN_TIMEOUT) {
        Ok((ZygoteEvent::Spawned { .. }, Some(pidfd))) => pidfd,
        Ok((ZygoteEvent::SpawnFailed { error, .. }, _)) => return Err(EngineError::Setup(error)),
        Ok((other, _)) => return Err(EngineError::ZygoteGone(format!("expected spawned, got {other:?}"))),
        Err(e) => return Err(EngineError::ZygoteGone(format!("no answer to the spawn request ({e})"))),
    };
    let deadline = start + timeout;
    let max_output = usize::try_from(max_output).unwrap_or(usize::MAX);

    let mut outgoing = Vec::new();
    write_frame(&mut outgoing, &EvalRequest { code: code.to_string() }).map_err(EngineError::io("encode the request"))?;
    ctl.set_nonblocking(true).map_err(EngineError::io("configure the child channel"))?;
    let mut ctl = Some(ctl);
    let mut decoder = FrameDecoder::default();
    let mut stdout = Stream::new(out_r).map_err(EngineError::io("configure the stdout pipe"))?;
    let mut stderr = Stream::new(err_r).map_err(EngineError::io("configure the stderr pipe"))?;

    let mut killed: Option<KillReason> = None;
    let mut reports: Vec<ChildReport> = Vec::new();
    let mut exited_at: Option<Instant> = None;
    let mut exit: Option<Exit> = None;
    let mut protocol_error: Option<String> = None;

    loop {
        let now = Instant::now();
        if killed.is_none() && exited_at.is_none() && now >= deadline {
            killed = Some(KillReason::Timeout);
            kill_via_pidfd(&pidfd);
        }
        if exited_at.is_some() && exit.is_none() {
            match events.recv_timeout(Duration::from_millis(1)) {
                Ok((ZygoteEvent::Exited { code, signal, cpu_ms, max_rss_kb, .. }, _)) => {
                    exit = Some(Exit { code, signal, cpu_ms, max_rss_kb })
                }
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(EngineError::ZygoteGone("it exited while a child was running".into()))
                }
            }
        }
        let pipes_done = stdout.fd.is_none() && stderr.fd.is_none() && ctl.is_none();
        if exit.is_some() && pipes_done {
            break;
        }
        if let Some(t) = exited_at {
            if now >= t + EXIT_GRACE {
                if exit.is_none() {
                    return Err(EngineError::ZygoteGone("no exit report for a finished child".into()));
                }
                break;
            }
        }

        let mut pollfds = Vec::with_capacity(5);
        let mut push = |fd: i32, events: i16| pollfds.push(libc::pollfd { fd, events, revents: 0 });
        for s in [&stdout, &stderr] {
            push(s.fd.as_ref().map_or(-1, |f| f.as_raw_fd()), libc::POLLIN);
        }
        push(violations.poll_fd(), libc::POLLIN);
        let ctl_events = if outgoing.is_empty() { libc::POLLIN } else { libc::POLLIN | libc::POLLOUT };
        push(ctl.as_ref().map_or(-1, |c| c.as_raw_fd()), ctl_events);
        push(if exited_at.is_none() { pidfd.as_raw_fd() } else { -1 }, libc::POLLIN);
        let wait = if exited_at.is_some() {
            Duration::from_millis(5)
        } else if killed.is_some() {
            Duration::from_millis(50)
        } else {
            deadline.saturating_duration_since(now)
        };
        let wait_ms = wait.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: pollfds is a valid array; negative fds are ignored by poll.
        let n = unsafe { libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, wait_ms) };
        if n < 0 {
            continue;
        }
        let output_room = |used: usize| max_output.saturating_sub(used);

        if pollfds[0].revents != 0 || pollfds[1].revents != 0 || exited_at.is_some() {
            let mut used = stdout.data.len() + stderr.data.len() + decoder.buffered();
            used += stdout.pump(output_room(used));
            used += stderr.pump(output_room(used));
            if used > max_output && killed.is_none() {
                killed = Some(KillReason::OutputLimit);
                kill_via_pidfd(&pidfd);
            }
        }
        if pollfds[2].revents != 0 && violations.service(pollfds[2].revents) && killed.is_none() {
            killed = Some(KillReason::Violation);
            kill_via_pidfd(&pidfd);
        }
        if let Some(stream) = ctl.as_mut() {
            if pollfds[3].revents & libc::POLLOUT != 0 && !outgoing.is_empty() {
                match stream.write(&outgoing) {
                    Ok(n) => {
                        outgoing.drain(..n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    // The child is gone before reading its code; its exit says why.
                    Err(_) => outgoing.clear(),
                }
            }
            if pollfds[3].revents != 0 || exited_at.is_some() {
                let mut buf = [0u8; 65536];
                loop {
                    match stream.read(&mut buf) {
                        Ok(0) => {
                            ctl = None;
                            break;
                        }
                        Ok(n) => decoder.push(&buf[..n]),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(_) => {
                            ctl = None;
                            break;
                        }
                    }
                }
                let used = stdout.data.len() + stderr.data.len() + decoder.buffered();
                if used > max_output && killed.is_none() {
                    killed = Some(KillReason::OutputLimit);
                    kill_via_pidfd(&pidfd);
                }
                loop {
                    match decoder.next_frame(MAX_FRAME) {
                        Ok(Some(body)) => match serde_json::from_slice::<ChildReport>(&body) {
                            Ok(report) => reports.push(report),
                            Err(e) => protocol_error = Some(format!("malformed report from the child: {e}")),
                        },
                        Ok(None) => break,
                        Err(e) => {
                            protocol_error = Some(e.to_string());
                            ctl = None;
                            break;
                        }
                    }
                }
            }
        }
        if exited_at.is_none() && pollfds[4].revents != 0 {
            exited_at = Some(Instant::now());
        }
    }
    let exit = exit.expect("loop ends only with an exit report");
    let wall_ms = start.elapsed().as_millis() as u64;
    Ok(compose(Observed {
        killed,
        reports,
        exit,
        stdout: stdout.data,
        stderr: stderr.data,
        violation: violations.syscall,
        protocol_error,
        wall_ms,
        cpu_limit,
    })?)
}

struct Observed {
    killed: Option<KillReason>,
    reports: Vec<ChildReport>,
    exit: Exit,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    violation: Option<i64>,
    protocol_error: Option<String>,
    wall_ms: u64,
    cpu_limit: Option<u64>,
}

fn compose(o: Observed) -> Result<EvalResult, EngineError> {
    let mut result = EvalResult {
        outcome: Outcome::Crashed,
        value: serde_json::Value::Null,
        visible: false,
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        messages: Vec::new(),
        warnings: Vec::new(),
        error: None,
        syntax_error: None,
        violation: None,
        plots: Vec::new(),
        usage: Usage { wall_ms: o.wall_ms, cpu_ms: o.exit.cpu_ms, max_rss_kb: o.exit.max_rss_kb },
        exit: ExitStatus { code: o.exit.code, signal: o.exit.signal },
        layers: None,
    };
    let mut evaluated = None;
    let mut quit = None;
    for report in o.reports {
        match report {
            ChildReport::SetupFailed { error } => return Err(EngineError::Setup(error)),
            ChildReport::LockedDown { applied } => result.layers = Some(applied),
            ChildReport::Evaluated { r, plots } => evaluated = Some((r, plots)),
            ChildReport::Quit { status } => quit = Some(status),
        }
    }
    if result.layers.is_none() && o.killed.is_none() {
        let why = o.protocol_error.unwrap_or_else(|| format!("the child ended before locking down ({:?})", result.exit));
        return Err(EngineError::Setup(why));
    }
    if let Some((r, plots)) = evaluated {
        apply_r_result(&mut result, &r);
        result.plots = plots.into_iter().map(|data_base64| Plot { format: "png".into(), data_base64 }).collect();
    }
    if let Some(status) = quit {
        result.outcome = if status == 0 { Outcome::Ok } else { Outcome::Error };
        if status != 0 {
            result.error = Some(RError { message: format!("quit(status = {status})"), call: None });
        }
    }
    let reported_nr = o.violation;
    let violation = |nr: Option<i64>| Violation {
        syscall: nr.and_then(lockdown::seccomp::syscall_name).unwrap_or("unknown").to_string(),
        number: nr,
    };
    let signal = o.exit.signal;
    let cpu_exhausted = o.cpu_limit.is_some_and(|limit| o.exit.cpu_ms >= limit * 1000);
    // Order matters: what the supervisor saw first (its own kill, a violation report)
    // explains the death better than the signal that followed.
    result.outcome = match (o.killed, reported_nr) {
        (_, Some(nr)) => {
            result.violation = Some(violation(Some(nr)));
            Outcome::Violation
        }
        (Some(KillReason::Timeout), _) => Outcome::Timeout,
        (Some(KillReason::OutputLimit), _) => Outcome::OutputLimit,
        (Some(KillReason::Violation), None) => {
            result.violation = Some(violation(None));
            Outcome::Violation
        }
        (None, None) => match signal {
            Some(libc::SIGXCPU) => Outcome::CpuLimit,
            Some(libc::SIGKILL) if cpu_exhausted => Outcome::CpuLimit,
            Some(libc::SIGXFSZ) => Outcome::FileSizeLimit,
            Some(libc::SIGSYS) => {
                result.violation = Some(violation(None));
                Outcome::Violation
            }
            Some(_) => Outcome::Crashed,
            // Exited by itself: what R reported (still `crashed` if it reported nothing).
            None => result.outcome,
        },
    };
    if matches!(result.outcome, Outcome::Crashed) && result.error.is_none() {
        let how = match (signal, o.exit.code) {
            (Some(s), _) => format!("killed by signal {s} ({})", signal_name(s)),
            (None, Some(c)) => format!("exited with status {c} without reporting a result"),
            _ => "ended without a result".into(),
        };
        result.error = Some(RError { message: format!("the R process crashed: {how}"), call: None });
    }
    Ok(result)
}

fn apply_r_result(result: &mut EvalResult, r: &serde_json::Value) {
    result.outcome = match r["status"].as_str() {
        Some("ok") => Outcome::Ok,
        Some("memory_limit") => Outcome::MemoryLimit,
        Some("process_limit") => Outcome::ProcessLimit,
        _ => Outcome::Error,
    };
    result.value = r["value"].clone();
    result.visible = r["visible"].as_bool().unwrap_or(false);
    result.messages = serde_json::from_value(r["messages"].clone()).unwrap_or_default();
    result.warnings = serde_json::from_value(r["warnings"].clone()).unwrap_or_default();
    result.error = serde_json::from_value(r["error"].clone()).unwrap_or(None);
    result.syntax_error = serde_json::from_value(r["syntax_error"].clone()).unwrap_or(None);
    if let (Some(syntax), None) = (&result.syntax_error, &result.error) {
        result.error = Some(RError { message: syntax.message.clone(), call: None });
    }
}

/// A signal's conventional name.
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        libc::SIGPIPE => "SIGPIPE",
        _ => "other",
    }
}
