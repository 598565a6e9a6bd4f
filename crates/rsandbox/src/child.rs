//! A sandbox child, seen from the supervisor: its channel, pipes, pidfd and violation
//! listener. [`SandboxChild::execute`] runs one request on it, watching the deadline,
//! the output limit, tool calls and violation reports, and turns what happened into an
//! [`EvalResult`] whose `outcome` names the reason a person understands.
//!
//! A one-shot evaluation is a child that serves one request; a session's child serves
//! many. Dropping a child kills its process group and waits for the zygote to reap it.

use crate::channel::Channel;
use crate::errors::EngineError;
use crate::protocol::{write_frame, ChildReport, ChildRequest, FrameDecoder, ToolStub, ZygoteEvent, ZygoteRequest, MAX_FRAME};
use crate::result::*;
use crate::tools::{check_call, Tool};
use crate::zygote::{Routed, Zygote};
use lockdown::Policy;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a child may take to be forked and lock itself down.
const SPAWN_TIMEOUT: Duration = Duration::from_secs(20);
/// After the child exits, how long to wait for the zygote's report and for pipes to close.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Why the supervisor killed the child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KillReason {
    Timeout,
    OutputLimit,
    Violation,
    Protocol,
}

/// Limits and tools for one request.
pub struct Request<'a> {
    /// R code.
    pub code: &'a str,
    /// Wall-clock limit for this request.
    pub timeout: Duration,
    /// stdout + stderr + result bytes allowed.
    pub max_output: u64,
    /// CPU seconds the child may use in all (for explaining a SIGKILL).
    pub cpu_limit: Option<u64>,
    /// Host tools callable from this request.
    pub tools: &'a [Tool],
    /// Tool calls allowed in this request.
    pub max_tool_calls: u32,
    /// Largest tool-call message (arguments as JSON).
    pub max_tool_message: usize,
    /// Called for every tool call and its answer (audit log).
    pub observer: &'a mut dyn FnMut(ToolEvent<'_>),
}

/// A tool call as the audit log sees it.
#[derive(Debug)]
pub enum ToolEvent<'a> {
    /// A call arrived (before checks).
    Call {
        /// Tool name.
        tool: &'a str,
        /// Arguments.
        args: &'a serde_json::Value,
    },
    /// The answer sent back.
    Result {
        /// Tool name.
        tool: &'a str,
        /// Whether it succeeded.
        ok: bool,
        /// The error text when it did not.
        error: Option<&'a str>,
    },
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

/// A readable pipe end and what came out of it since the last `take`.
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
            if n == 0 || io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock {
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
                // The caller died before we looked: that notification is gone, but the
                // listener must stay, or later violations would only fail with ENOSYS.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => false,
                Err(_) => {
                    self.listener = None;
                    false
                }
            };
        }
        if let Some(channel) = &self.channel {
            if let Ok(Some((_, mut fds))) = channel.recv() {
                self.listener = fds.pop();
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

/// A locked-down child of the zygote, ready for requests.
pub struct SandboxChild {
    zygote: Arc<Zygote>,
    req: u64,
    events: Receiver<Routed>,
    pidfd: OwnedFd,
    ctl: Option<UnixStream>,
    decoder: FrameDecoder,
    stdout: Stream,
    stderr: Stream,
    violations: ViolationWatch,
    layers: lockdown::Applied,
    exit: Option<Exit>,
    dead: bool,
}

impl SandboxChild {
    /// Fork a child and wait until it has locked itself down (fail closed: a child that
    /// could not apply every layer is an error, and nothing runs in it).
    pub fn spawn(
        zygote: &Arc<Zygote>,
        policy: Policy,
        workspace: &Path,
        env: Vec<(String, String)>,
        tools: &[Tool],
    ) -> Result<SandboxChild, EngineError> {
        let (out_r, out_w) = pipe().map_err(EngineError::io("create the stdout pipe"))?;
        let (err_r, err_w) = pipe().map_err(EngineError::io("create the stderr pipe"))?;
        let (viol_ours, viol_child) = Channel::pair().map_err(EngineError::io("create the violation channel"))?;
        let (ctl, ctl_child) = UnixStream::pair().map_err(EngineError::io("create the child channel"))?;
        let stubs = tools
            .iter()
            .map(|t| ToolStub { name: t.spec.name.clone(), args: t.spec.args.keys().cloned().collect() })
            .collect();
        let (req, events) = zygote.spawn(
            |req| ZygoteRequest::Spawn { req, policy, workspace: workspace.to_path_buf(), env, tools: stubs },
            &[ctl_child.as_fd(), out_w.as_fd(), err_w.as_fd(), viol_child.as_fd()],
        )?;
        drop((ctl_child, out_w, err_w, viol_child));
        let forget = |e| {
            zygote.forget(req);
            e
        };
        let pidfd = match events.recv_timeout(SPAWN_TIMEOUT) {
            Ok((ZygoteEvent::Spawned { .. }, Some(pidfd))) => pidfd,
            Ok((ZygoteEvent::SpawnFailed { error, .. }, _)) => return Err(forget(EngineError::Setup(error))),
            Ok((other, _)) => return Err(forget(EngineError::ZygoteGone(format!("expected spawned, got {other:?}")))),
            Err(e) => return Err(forget(EngineError::ZygoteGone(format!("no answer to the spawn request ({e})")))),
        };
        let mut child = SandboxChild {
            zygote: zygote.clone(),
            req,
            events,
            pidfd,
            ctl: None,
            decoder: FrameDecoder::default(),
            stdout: Stream::new(out_r).map_err(EngineError::io("configure the stdout pipe"))?,
            stderr: Stream::new(err_r).map_err(EngineError::io("configure the stderr pipe"))?,
            violations: ViolationWatch { channel: Some(viol_ours), listener: None, syscall: None },
            layers: lockdown::Applied {
                namespaces: Vec::new(),
                workspace_quota: None,
                private_root: false,
                identity: None,
                landlock: lockdown::LandlockEnforcement::None,
                seccomp: false,
            },
            exit: None,
            dead: false,
        };
        child.layers = child.await_lockdown(ctl)?;
        Ok(child)
    }

    /// Read reports until `LockedDown` (or failure). The violation listener arrives
    /// before it: the child sends it while installing seccomp.
    fn await_lockdown(&mut self, mut ctl: UnixStream) -> Result<lockdown::Applied, EngineError> {
        ctl.set_read_timeout(Some(SPAWN_TIMEOUT)).map_err(EngineError::io("configure the child channel"))?;
        let report = crate::protocol::read_frame::<ChildReport>(&mut ctl, MAX_FRAME);
        match report {
            Ok(ChildReport::LockedDown { applied }) => {
                // The listener was sent before LockedDown; take it now.
                self.violations.service(libc::POLLIN);
                ctl.set_read_timeout(None).map_err(EngineError::io("configure the child channel"))?;
                ctl.set_nonblocking(true).map_err(EngineError::io("configure the child channel"))?;
                self.ctl = Some(ctl);
                if self.violations.listener.is_none() {
                    return Err(EngineError::Setup("the child did not hand over its seccomp listener".into()));
                }
                Ok(applied)
            }
            Ok(ChildReport::SetupFailed { error }) => Err(EngineError::Setup(error)),
            Ok(other) => Err(EngineError::Setup(format!("expected locked_down, got {other:?}"))),
            Err(e) => Err(EngineError::Setup(format!("the child ended before locking down ({e})"))),
        }
    }

    /// What the child enforced.
    pub fn layers(&self) -> &lockdown::Applied {
        &self.layers
    }

    /// Whether the child is still able to serve requests.
    pub fn is_alive(&self) -> bool {
        !self.dead && self.ctl.is_some()
    }

    /// SIGKILL the child (its group dies with it, killed by the zygote on reaping).
    pub fn kill(&self) {
        // SAFETY: signalling the process the pidfd refers to; no pointers besides a null
        // info. ESRCH (already gone) is the only expected failure and needs no action.
        unsafe { libc::syscall(libc::SYS_pidfd_send_signal, self.pidfd.as_raw_fd(), libc::SIGKILL, std::ptr::null::<u8>(), 0) };
    }

    /// Run one request. The child stays usable afterwards unless the result's outcome
    /// says it died (anything but `ok`/`error`, or a `quit()`), see [`Self::is_alive`].
    pub fn execute(&mut self, mut request: Request<'_>) -> Result<EvalResult, EngineError> {
        if !self.is_alive() {
            return Err(EngineError::Setup("the sandbox child is no longer running".into()));
        }
        let start = Instant::now();
        let deadline = start + request.timeout;
        let max_output = usize::try_from(request.max_output).unwrap_or(usize::MAX);
        self.stdout.data.clear();
        self.stderr.data.clear();
        let mut outgoing = Vec::new();
        write_frame(&mut outgoing, &ChildRequest::Eval { code: request.code.to_string() })
            .map_err(EngineError::io("encode the request"))?;

        let mut killed: Option<KillReason> = None;
        let mut evaluated: Option<ChildReport> = None;
        let mut exited_at: Option<Instant> = None;
        let mut protocol_error: Option<String> = None;
        let mut tool_calls = 0u32;
        let mut cap_exceeded = false;

        loop {
            let now = Instant::now();
            if killed.is_none() && exited_at.is_none() && now >= deadline {
                killed = Some(KillReason::Timeout);
                self.kill();
            }
            if exited_at.is_some() && self.exit.is_none() {
                match self.events.recv_timeout(Duration::from_millis(1)) {
                    Ok((ZygoteEvent::Exited { code, signal, cpu_ms, max_rss_kb, .. }, _)) => {
                        self.exit = Some(Exit { code, signal, cpu_ms, max_rss_kb })
                    }
                    Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => {
                        self.dead = true;
                        return Err(EngineError::ZygoteGone("it exited while a child was running".into()));
                    }
                }
            }
            // A finished request on a live child: collect what the pipes still hold.
            if evaluated.is_some() && exited_at.is_none() && killed.is_none() {
                let used = self.stdout.data.len() + self.stderr.data.len();
                let used = used + self.stdout.pump(max_output.saturating_sub(used));
                self.stderr.pump(max_output.saturating_sub(used));
                break;
            }
            let pipes_done = self.stdout.fd.is_none() && self.stderr.fd.is_none() && self.ctl.is_none();
            if self.exit.is_some() && pipes_done {
                break;
            }
            if let Some(t) = exited_at {
                if now >= t + EXIT_GRACE {
                    if self.exit.is_none() {
                        self.dead = true;
                        return Err(EngineError::ZygoteGone("no exit report for a finished child".into()));
                    }
                    break;
                }
            }

            let mut pollfds = Vec::with_capacity(5);
            let mut push = |fd: i32, events: i16| pollfds.push(libc::pollfd { fd, events, revents: 0 });
            for s in [&self.stdout, &self.stderr] {
                push(s.fd.as_ref().map_or(-1, |f| f.as_raw_fd()), libc::POLLIN);
            }
            push(self.violations.poll_fd(), libc::POLLIN);
            let ctl_events = if outgoing.is_empty() { libc::POLLIN } else { libc::POLLIN | libc::POLLOUT };
            push(self.ctl.as_ref().map_or(-1, |c| c.as_raw_fd()), ctl_events);
            push(if exited_at.is_none() { self.pidfd.as_raw_fd() } else { -1 }, libc::POLLIN);
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

            if pollfds[0].revents != 0 || pollfds[1].revents != 0 || exited_at.is_some() {
                let mut used = self.stdout.data.len() + self.stderr.data.len() + self.decoder.buffered();
                used += self.stdout.pump(max_output.saturating_sub(used));
                used += self.stderr.pump(max_output.saturating_sub(used));
                if used > max_output && killed.is_none() {
                    killed = Some(KillReason::OutputLimit);
                    self.kill();
                }
            }
            if pollfds[2].revents != 0 && self.violations.service(pollfds[2].revents) && killed.is_none() {
                killed = Some(KillReason::Violation);
                self.kill();
            }
            if let Some(stream) = self.ctl.as_mut() {
                if pollfds[3].revents & libc::POLLOUT != 0 && !outgoing.is_empty() {
                    match stream.write(&outgoing) {
                        Ok(n) => {
                            outgoing.drain(..n);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        // The child is gone before reading; its exit says why.
                        Err(_) => outgoing.clear(),
                    }
                }
                if pollfds[3].revents != 0 || exited_at.is_some() {
                    let mut buf = [0u8; 65536];
                    loop {
                        match stream.read(&mut buf) {
                            Ok(0) => {
                                self.ctl = None;
                                break;
                            }
                            Ok(n) => self.decoder.push(&buf[..n]),
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            Err(_) => {
                                self.ctl = None;
                                break;
                            }
                        }
                    }
                    let used = self.stdout.data.len() + self.stderr.data.len() + self.decoder.buffered();
                    if used > max_output && killed.is_none() {
                        killed = Some(KillReason::OutputLimit);
                        self.kill();
                    }
                    while let Some(report) = self.next_report(&mut protocol_error) {
                        match report {
                            ChildReport::ToolCall { call, tool, args } => {
                                tool_calls += 1;
                                let reply = Self::answer_tool_call(&mut request, tool_calls, &mut cap_exceeded, call, &tool, &args);
                                write_frame(&mut outgoing, &reply).map_err(EngineError::io("encode a tool reply"))?;
                            }
                            done @ (ChildReport::Evaluated { .. } | ChildReport::Quit { .. }) => evaluated = Some(done),
                            other => protocol_error = Some(format!("unexpected report {other:?}")),
                        }
                    }
                    if protocol_error.is_some() && killed.is_none() {
                        killed = Some(KillReason::Protocol);
                        self.kill();
                    }
                }
            }
            if exited_at.is_none() && pollfds[4].revents != 0 {
                exited_at = Some(Instant::now());
                self.dead = true;
            }
        }
        if killed == Some(KillReason::OutputLimit) {
            // The limit covers the result too: nothing past it is reported, however
            // much of the result frame had arrived.
            evaluated = None;
        }
        let wall_ms = start.elapsed().as_millis() as u64;
        let quit = matches!(evaluated, Some(ChildReport::Quit { .. }));
        let mut result = compose(Observed {
            killed,
            evaluated,
            exit: self.exit.as_ref(),
            stdout: std::mem::take(&mut self.stdout.data),
            stderr: std::mem::take(&mut self.stderr.data),
            violation: self.violations.syscall,
            protocol_error,
            wall_ms,
            cpu_limit: request.cpu_limit,
        });
        result.layers = Some(self.layers.clone());
        if quit {
            // quit() ends the R process; the child is no longer usable.
            self.kill();
            self.dead = true;
        }
        if cap_exceeded {
            result.tool_call_limit_exceeded = true;
        }
        Ok(result)
    }

    fn next_report(&mut self, protocol_error: &mut Option<String>) -> Option<ChildReport> {
        match self.decoder.next_frame(MAX_FRAME) {
            Ok(Some(body)) => match serde_json::from_slice::<ChildReport>(&body) {
                Ok(report) => Some(report),
                Err(e) => {
                    *protocol_error = Some(format!("malformed report from the child: {e}"));
                    None
                }
            },
            Ok(None) => None,
            Err(e) => {
                *protocol_error = Some(e.to_string());
                None
            }
        }
    }

    fn answer_tool_call(
        request: &mut Request<'_>,
        count: u32,
        cap_exceeded: &mut bool,
        call: u64,
        tool: &str,
        args: &serde_json::Value,
    ) -> ChildRequest {
        (request.observer)(ToolEvent::Call { tool, args });
        let size = args.to_string().len();
        let answer = if count > request.max_tool_calls {
            *cap_exceeded = true;
            Err(format!("tool call limit of {} per execute exceeded", request.max_tool_calls))
        } else if size > request.max_tool_message {
            Err(format!("tool call message of {size} bytes exceeds the limit of {}", request.max_tool_message))
        } else {
            check_call(request.tools, tool, args).and_then(|t| {
                let empty = serde_json::Map::new();
                (t.handler)(args.as_object().unwrap_or(&empty))
            })
        };
        (request.observer)(ToolEvent::Result { tool, ok: answer.is_ok(), error: answer.as_ref().err().map(String::as_str) });
        match answer {
            Ok(value) => ChildRequest::ToolReply { call, value: Some(value), error: None },
            Err(error) => ChildRequest::ToolReply { call, value: None, error: Some(error) },
        }
    }
}

impl Drop for SandboxChild {
    fn drop(&mut self) {
        self.kill();
        // Wait (briefly) until the zygote has reaped it and killed its group, so the
        // workspace is no longer in use when the caller removes it.
        if self.exit.is_none() && !self.dead || self.exit.is_none() {
            let deadline = Instant::now() + EXIT_GRACE;
            while Instant::now() < deadline {
                match self.events.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok((ZygoteEvent::Exited { .. }, _)) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        }
        self.zygote.forget(self.req);
    }
}

struct Observed<'a> {
    killed: Option<KillReason>,
    evaluated: Option<ChildReport>,
    exit: Option<&'a Exit>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    violation: Option<i64>,
    protocol_error: Option<String>,
    wall_ms: u64,
    cpu_limit: Option<u64>,
}

fn compose(o: Observed<'_>) -> EvalResult {
    let (code, signal) = o.exit.map_or((None, None), |e| (e.code, e.signal));
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
        usage: Usage { wall_ms: o.wall_ms, cpu_ms: 0, max_rss_kb: 0 },
        exit: ExitStatus { code, signal },
        layers: None,
        reset: false,
        reset_reason: None,
        tool_call_limit_exceeded: false,
    };
    if let Some(e) = o.exit {
        result.usage.cpu_ms = e.cpu_ms;
        result.usage.max_rss_kb = e.max_rss_kb;
    }
    match o.evaluated {
        Some(ChildReport::Evaluated { r, plots, cpu_ms, max_rss_kb }) => {
            apply_r_result(&mut result, &r);
            result.plots = plots.into_iter().map(|data_base64| Plot { format: "png".into(), data_base64 }).collect();
            result.usage.cpu_ms = result.usage.cpu_ms.max(cpu_ms);
            result.usage.max_rss_kb = result.usage.max_rss_kb.max(max_rss_kb);
        }
        Some(ChildReport::Quit { status }) => {
            result.outcome = if status == 0 { Outcome::Ok } else { Outcome::Error };
            if status != 0 {
                result.error = Some(RError { message: format!("quit(status = {status})"), call: None });
            }
        }
        _ => {}
    }
    let violation = |nr: Option<i64>| Violation {
        syscall: nr.and_then(lockdown::seccomp::syscall_name).unwrap_or("unknown").to_string(),
        number: nr,
    };
    let cpu_exhausted = o.cpu_limit.is_some_and(|limit| result.usage.cpu_ms >= limit * 1000);
    // Order matters: what the supervisor saw first (a violation report, its own kill)
    // explains the death better than the signal that followed.
    result.outcome = match (o.violation, o.killed) {
        (Some(nr), _) => {
            result.violation = Some(violation(Some(nr)));
            Outcome::Violation
        }
        (None, Some(KillReason::Timeout)) => Outcome::Timeout,
        (None, Some(KillReason::OutputLimit)) => Outcome::OutputLimit,
        (None, Some(KillReason::Violation)) => {
            result.violation = Some(violation(None));
            Outcome::Violation
        }
        (None, Some(KillReason::Protocol)) => {
            let why = o.protocol_error.clone().unwrap_or_default();
            result.error = Some(RError { message: format!("the sandbox broke protocol: {why}"), call: None });
            Outcome::Crashed
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
            // Still running or exited by itself: what R reported (`crashed` if nothing).
            None => result.outcome,
        },
    };
    if result.outcome == Outcome::Crashed && result.error.is_none() {
        let how = match (signal, code) {
            (Some(s), _) => format!("killed by signal {s} ({})", signal_name(s)),
            (None, Some(c)) => format!("exited with status {c} without reporting a result"),
            _ => "ended without a result".into(),
        };
        result.error = Some(RError { message: format!("the R process crashed: {how}"), call: None });
    }
    result
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
