//! A sandbox child, seen from the supervisor: its channel, pipes, pidfd and violation
//! listener. [`SandboxChild::execute`] runs one request on it, watching the deadline,
//! the output limit, tool calls and violation reports, and turns what happened into an
//! [`EvalResult`] whose `outcome` names the reason a person understands.
//!
//! A one-shot evaluation is a child that serves one request; a session's child serves
//! many. Dropping a child kills its process group and waits for the zygote to reap it.
//!
//! By concern: [`streams`] (stdout/stderr under the output limit), [`violations`] (the
//! seccomp listener), [`tool_bridge`] (tool calls answered on the host), [`outcome`]
//! (what happened, as one result).

mod interrupt;
mod outcome;
mod streams;
mod tool_bridge;
mod violations;

pub use interrupt::Interrupter;
pub use outcome::{compose_observed, signal_name, SupervisorView};
pub use tool_bridge::ToolEvent;

use crate::errors::{out_of_descriptors, EngineError, RefusedLayer};
use crate::events::{Event, OutputStream};
use crate::meter::{self, Meter};
use crate::result::EvalResult;
use crate::tools::Tool;
use crate::zygote::{Routed, Zygote};
use lockdown::Policy;
use outcome::{compose, Exit, KillReason, Observed};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use streams::{pipe, Output, Stream, READ_BUDGET};
use tool_bridge::ToolBridge;
use violations::{ViolationWatch, Watch};
use wire::child_link::{await_lockdown, encode_request, ChildReports, Lockdown};
use wire::messages::{ChildReport, ChildRequest, ToolStub, ZygoteEvent, ZygoteRequest};
use wire::seqpacket::Channel;
use wire::zygote_link::SpawnFds;

/// How long a child may take to be forked and lock itself down (or define its tools).
const SPAWN_TIMEOUT: Duration = Duration::from_secs(20);
/// After the child exits, how long to wait for the zygote's report and for pipes to close.
const EXIT_GRACE: Duration = Duration::from_secs(5);
/// How long R has to yield to an interrupt before the child is killed.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(2);
/// How long a request between evaluations (files, snapshots) may take.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(60);
/// Output a child may write while it serves a request between evaluations: its own
/// answers travel in reports, so this is only what code running meanwhile prints.
const MAX_EXCHANGE_OUTPUT: usize = 1 << 20;
/// Bytes of replies a child may leave unread before it is stopped: a child that makes
/// calls and never reads the answers would otherwise grow the supervisor without bound.
const MAX_UNREAD_REPLIES: usize = 8 << 20;

/// Limits and tools for one request.
pub struct Request<'a> {
    /// R code.
    pub code: &'a str,
    /// Wall-clock limit for this request.
    pub timeout: Duration,
    /// stdout + stderr + result bytes allowed.
    pub max_output: u64,
    /// CPU seconds the sandbox may use in all, every process together.
    pub cpu_limit: Option<u64>,
    /// Bytes the sandbox's processes may hold together beyond its start.
    pub memory_limit: Option<u64>,
    /// Host tools callable from this request.
    pub tools: &'a [Tool],
    /// Tool calls allowed in this request.
    pub max_tool_calls: u32,
    /// Largest tool-call message (arguments as JSON).
    pub max_tool_message: usize,
    /// Called for every tool call and its answer (audit log).
    pub observer: &'a mut dyn FnMut(ToolEvent<'_>),
    /// Streamed output, as it is produced (`None`: nothing streamed, nothing extra sent).
    pub on_event: Option<&'a mut dyn FnMut(Event<'_>)>,
    /// At the deadline, interrupt first and kill only if R does not yield within
    /// [`INTERRUPT_GRACE`] (a session keeps its state); otherwise kill at once.
    pub interrupt_on_timeout: bool,
    /// `commandArgs(trailingOnly = TRUE)` for this evaluation (empty: unchanged).
    pub args: &'a [String],
    /// Print visible values as a console does; `false`: silently, the last value
    /// returned visible or not.
    pub echo: bool,
    /// The profile's function allowlist (`None`: off).
    pub functions: Option<&'a [String]>,
    /// Values bound before the code runs (typed encoding, checked by the caller).
    pub globals: &'a serde_json::Map<String, serde_json::Value>,
    /// Also return the value in the typed encoding.
    pub typed: bool,
}

/// A locked-down child of the zygote, ready for requests.
pub struct SandboxChild {
    zygote: Arc<Zygote>,
    req: u64,
    events: Receiver<Routed>,
    pidfd: OwnedFd,
    ctl: Option<UnixStream>,
    reports: ChildReports,
    output: Output,
    violations: ViolationWatch,
    layers: lockdown::Applied,
    lockdown_us: u64,
    interrupter: Interrupter,
    /// CPU and memory of the whole process group.
    meter: Option<Meter>,
    /// The sandbox was seen to be more than one process since its last clean-up
    /// ([`Meter::has_company`]): until then its rlimits bound it exactly, and neither
    /// the meter nor the clean-up scans /proc.
    forked: bool,
    exit: Option<Exit>,
    dead: bool,
    /// The sandbox's CPU seconds and memory (its policy's), metered during exchanges
    /// between evaluations as during evaluations.
    cpu_limit: Option<u64>,
    memory_limit: Option<u64>,
    /// Network by proxy: the supervisor's proxy serving this child's listener.
    proxy: Option<egress::EgressHandle>,
}

/// The proxy that serves a network sandbox, and the allowlist it enforces.
pub struct Proxy<'a> {
    /// The engine's proxy service.
    pub egress: &'a egress::Egress,
    /// What this sandbox may reach.
    pub policy: Arc<egress::NetworkPolicy>,
}

/// The state of one request while it runs.
struct Execution {
    /// `None`: an evaluation (its answer is `evaluated` or `quit`); `Some(tag)`: a
    /// request between evaluations, answered by one report (`tag`, or `refused`).
    awaiting: Option<&'static str>,
    deadline: Instant,
    max_output: usize,
    /// Encoded frames not yet written to the child (the request, tool replies).
    outgoing: Vec<u8>,
    killed: Option<KillReason>,
    evaluated: Option<ChildReport>,
    exited_at: Option<Instant>,
    protocol_error: Option<String>,
    /// When SIGINT went to the child (an interrupt, or the deadline of a session).
    interrupted_at: Option<Instant>,
    /// The deadline passed (the result is `timeout` even if R yielded).
    timed_out: bool,
    interrupt_on_timeout: bool,
    /// Bytes of stdout and stderr already streamed.
    streamed: [usize; 2],
    /// Bytes of messages and warnings streamed as they were signalled: they count
    /// against the output limit as they arrive, as captured output does.
    streamed_reports: usize,
    /// When the meter reads the sandbox next.
    next_sample: Instant,
    cpu_limit_ms: Option<u64>,
    memory_limit: Option<u64>,
    /// The last CPU total and the peak memory the meter read.
    metered_cpu_ms: Option<u64>,
    metered_memory_peak: u64,
}

impl Execution {
    /// A request about to start at `start`: `outgoing` is its encoded frame; `limits` the
    /// sandbox's CPU seconds and memory for the meter.
    fn new(
        awaiting: Option<&'static str>,
        start: Instant,
        deadline: Instant,
        max_output: usize,
        outgoing: Vec<u8>,
        (cpu_limit, memory_limit): (Option<u64>, Option<u64>),
    ) -> Execution {
        Execution {
            awaiting,
            deadline,
            max_output,
            outgoing,
            killed: None,
            evaluated: None,
            exited_at: None,
            protocol_error: None,
            interrupted_at: None,
            timed_out: false,
            interrupt_on_timeout: false,
            streamed: [0, 0],
            streamed_reports: 0,
            // Not at the start: between requests nothing of the sandbox runs (stopped,
            // and what R left was ended), so the leader is alone until its code forks,
            // and its rlimits bound it meanwhile. A request shorter than one interval is
            // looked at once, at its end.
            next_sample: start + meter::INTERVAL,
            cpu_limit_ms: cpu_limit.map(|s| s.saturating_mul(1000)),
            memory_limit,
            metered_cpu_ms: None,
            metered_memory_peak: 0,
        }
    }
}

/// Positions in the poll set.
const STDOUT: usize = 0;
const STDERR: usize = 1;
const VIOLATIONS: usize = 2;
const CONTROL: usize = 3;
const PIDFD: usize = 4;
const WAKE: usize = 5;

impl SandboxChild {
    /// Fork a child and wait until it has locked itself down (fail closed: a child that
    /// could not apply every layer is an error, and nothing runs in it). `warm_up`: the
    /// child evaluates `1 + 1` on its own before its lockdown (for a child forked ahead
    /// of its request; see [`ZygoteRequest::Spawn`]).
    pub fn spawn(
        zygote: &Arc<Zygote>,
        policy: Policy,
        workspace: &Path,
        env: Vec<(String, String)>,
        tools: &[Tool],
        proxy: Option<Proxy<'_>>,
        warm_up: bool,
    ) -> Result<SandboxChild, EngineError> {
        if policy.network != proxy.is_some() {
            return Err(EngineError::Setup("network layer: a network policy needs its proxy, and only it".into()));
        }
        let (out_r, out_w) = pipe().map_err(EngineError::io("create the stdout pipe"))?;
        let (err_r, err_w) = pipe().map_err(EngineError::io("create the stderr pipe"))?;
        let (viol_ours, viol_child) = Channel::pair().map_err(EngineError::io("create the violation channel"))?;
        let (ctl, ctl_child) = UnixStream::pair().map_err(EngineError::io("create the child channel"))?;
        let stubs = tool_stubs(tools);
        let violations = ViolationWatch::new(viol_ours, &policy);
        let fds = SpawnFds {
            control: ctl_child.as_fd(),
            stdout: out_w.as_fd(),
            stderr: err_w.as_fd(),
            violations: viol_child.as_fd(),
        };
        let (cpu_limit, memory_limit) = (policy.limits.cpu_seconds, policy.limits.memory);
        let (req, events) = zygote.spawn(
            |req| ZygoteRequest::Spawn { req, policy, workspace: workspace.to_path_buf(), env, tools: stubs, warm_up },
            fds,
        )?;
        drop((ctl_child, out_w, err_w, viol_child));
        let forget = |e| {
            zygote.forget(req);
            e
        };
        let (pid, pidfd) = match events.recv_timeout(SPAWN_TIMEOUT) {
            Ok((ZygoteEvent::Spawned { pid, .. }, Some(pidfd))) => (pid, pidfd),
            // No descriptor was free here for its pidfd: the server's capacity. The child,
            // which this end cannot signal without the pidfd, ends on its own when its
            // channels close (they are dropped with this error); the zygote reaps it.
            Ok((ZygoteEvent::Spawned { .. }, None)) => {
                let lost = lockdown::fdpass::fds_lost();
                return Err(forget(EngineError::io("receive the sandbox's pidfd")(lost)));
            }
            // No process, memory or descriptor was free for the fork: capacity, as when
            // this end runs out of descriptors.
            Ok((ZygoteEvent::SpawnFailed { error, capacity: true, .. }, _)) => {
                return Err(forget(EngineError::Capacity(error)))
            }
            Ok((ZygoteEvent::SpawnFailed { error, .. }, _)) => return Err(forget(EngineError::Setup(error))),
            Ok((other, _)) => {
                return Err(forget(EngineError::ZygoteGone(format!("expected spawned, got {}", other.tag()))))
            }
            Err(e) => return Err(forget(EngineError::ZygoteGone(format!("no answer to the spawn request ({e})")))),
        };
        let interrupter = Interrupter::new(pidfd.as_fd()).map_err(EngineError::io("create the interrupter"))?;
        let mut child = SandboxChild {
            interrupter,
            zygote: zygote.clone(),
            req,
            events,
            pidfd,
            ctl: None,
            reports: ChildReports::default(),
            output: Output {
                stdout: Stream::new(out_r).map_err(EngineError::io("configure the stdout pipe"))?,
                stderr: Stream::new(err_r).map_err(EngineError::io("configure the stderr pipe"))?,
            },
            violations,
            layers: lockdown::Applied {
                namespaces: Vec::new(),
                workspace_quota: None,
                private_root: false,
                identity: None,
                landlock: lockdown::LandlockEnforcement::None,
                seccomp: false,
                nice: None,
                programs: 0,
                learning: false,
                proxy_port: None,
            },
            lockdown_us: 0,
            cpu_limit,
            memory_limit,
            meter: None,
            forked: false,
            exit: None,
            dead: false,
            proxy: None,
        };
        child.layers = child.await_lockdown(ctl)?;
        if let Some(Proxy { egress, policy }) = proxy {
            // Fail closed: a network sandbox whose listener did not come, or that no
            // proxy serves, does not run (R would hang on a queue nobody reads).
            let listener = child
                .violations
                .take_proxy_listener()
                .ok_or_else(|| EngineError::Setup("network layer: the child sent no proxy listener".into()))?;
            if child.layers.proxy_port.is_none() {
                return Err(EngineError::Setup("network layer: the child reported no proxy port".into()));
            }
            child.proxy =
                Some(egress.serve(listener, policy).map_err(EngineError::io("serve the sandbox's proxy listener"))?);
        }
        // Fail closed: a sandbox whose processes cannot be counted together would have
        // per-process limits only.
        let meter = Meter::for_child(pid, zygote.pss_share()).map_err(|e| {
            if out_of_descriptors(&e) {
                // The server's capacity, not the sandbox's setup (told as such, with the limit).
                EngineError::io("meter the sandbox's processes")(e)
            } else {
                EngineError::Setup(format!("cannot meter the sandbox's processes in /proc: {e}"))
            }
        })?;
        child.meter = Some(meter);
        Ok(child)
    }

    /// Read reports until `LockedDown` (or failure). The violation listener arrives
    /// before it: the child sends it while installing seccomp.
    fn await_lockdown(&mut self, ctl: UnixStream) -> Result<lockdown::Applied, EngineError> {
        let configure = EngineError::io("configure the child channel");
        ctl.set_read_timeout(Some(SPAWN_TIMEOUT)).map_err(configure)?;
        // Learning mode: the child's file calls wait for answers from the moment seccomp
        // is installed, so the listener is served before the lockdown report is read. If
        // it never comes, the report says why (or the missing listener is the error).
        let mut listener = None;
        if self.violations.is_learning() {
            listener = Some(self.violations.take_listener(SPAWN_TIMEOUT).and_then(|()| {
                self.violations.serve_learning(self.pidfd.as_fd()).map_err(|e| {
                    EngineError::Setup(format!("no violation reporter: cannot start the learning thread: {e}"))
                })
            }));
        }
        let applied = match await_lockdown(&ctl) {
            Ok(Lockdown::Applied(applied, lockdown_us)) => {
                self.lockdown_us = lockdown_us;
                applied
            }
            Ok(Lockdown::Failed(error)) => return Err(setup_failure(error)),
            Err(e) => return Err(EngineError::Setup(format!("the child did not lock down: {e}"))),
        };
        listener.unwrap_or_else(|| self.violations.take_listener(SPAWN_TIMEOUT))?;
        ctl.set_read_timeout(None).map_err(EngineError::io("configure the child channel"))?;
        ctl.set_nonblocking(true).map_err(EngineError::io("configure the child channel"))?;
        self.ctl = Some(ctl);
        Ok(applied)
    }

    /// One request between evaluations (tools, files, snapshots) and its answer. Code
    /// may run here (a snapshot reads the session's variables: active bindings and
    /// promises are code; a restore unserializes), so it is driven like an evaluation:
    /// one deadline for the whole exchange, the meter, and the clean-up of whatever R
    /// left running. A child that does not answer cleanly is killed: it is in an
    /// unknown state.
    pub fn exchange(&mut self, request: &ChildRequest, expected: &'static str) -> Result<ChildReport, EngineError> {
        if !self.is_alive() {
            return Err(EngineError::Setup("the sandbox child is no longer running".into()));
        }
        self.resume();
        let start = Instant::now();
        self.output.clear();
        let mut run = Execution::new(
            Some(expected),
            start,
            start + EXCHANGE_TIMEOUT,
            MAX_EXCHANGE_OUTPUT,
            encode_request(request),
            (self.cpu_limit, self.memory_limit),
        );
        // No host tools answer here: a tool call is refused like an unknown tool's.
        let mut observe = |_: ToolEvent<'_>| {};
        let mut bridge = ToolBridge {
            tools: &[],
            max_calls: 0,
            max_message: 0,
            observer: &mut observe,
            calls: 0,
            cap_exceeded: false,
        };
        let driven = self.drive(&mut run, &mut bridge, false, &mut |_| {});
        // The pipes' bytes belong to no evaluation.
        self.output.clear();
        let failure = match (&driven, run.killed.take(), run.evaluated.take()) {
            (Ok(()), None, Some(answer)) if self.is_alive() => return Ok(answer),
            (Err(e), _, _) => e.to_string(),
            (_, Some(reason), _) => format!("it was stopped ({})", reason.describe()),
            (_, None, _) => "it ended without answering".to_string(),
        };
        self.kill();
        self.dead = true;
        Err(EngineError::Setup(format!("the sandbox did not answer {}: {failure}", request.tag())))
    }

    /// Define host tools in a child forked without them (a pre-forked child becoming a
    /// session's). A child that fails this is killed.
    pub fn define_tools(&mut self, tools: &[Tool]) -> Result<(), EngineError> {
        if tools.is_empty() {
            return Ok(());
        }
        match self.exchange(&ChildRequest::DefineTools { tools: tool_stubs(tools) }, "tools_defined")? {
            ChildReport::ToolsDefined => Ok(()),
            other => {
                self.kill();
                self.dead = true;
                let why = match other {
                    ChildReport::ToolsFailed { error } => error,
                    other => format!("expected tools_defined, got {}", other.tag()),
                };
                Err(EngineError::Setup(format!("failed to define tools: {why}")))
            }
        }
    }

    /// Collect the warm-up's garbage (`ChildRequest::Settle`): a waiting child's first
    /// request then takes fewer copy-on-write faults. A child that fails this is killed.
    pub fn settle(&mut self) -> Result<(), EngineError> {
        match self.exchange(&ChildRequest::Settle, "settled")? {
            ChildReport::Settled => Ok(()),
            other => {
                self.kill();
                self.dead = true;
                Err(EngineError::Setup(format!("the sandbox did not settle: expected settled, got {}", other.tag())))
            }
        }
    }

    /// A handle that interrupts this child's running evaluation from another thread.
    pub fn interrupter(&self) -> Interrupter {
        self.interrupter.clone()
    }

    /// What the child enforced.
    pub fn layers(&self) -> &lockdown::Applied {
        &self.layers
    }

    /// Whether the child is still able to serve requests.
    pub fn is_alive(&self) -> bool {
        !self.dead && self.ctl.is_some()
    }

    /// Whether the process has ended (a child waiting idle may have been killed, by the
    /// zygote's end or an operator). One non-blocking poll of the pidfd.
    pub fn has_exited(&self) -> bool {
        let mut fds = [rustix::event::PollFd::new(&self.pidfd, rustix::event::PollFlags::IN)];
        // An error (EINTR) is reported as "not exited": the next look decides.
        rustix::event::poll(&mut fds, Some(&rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 })).is_ok_and(|n| n != 0)
    }

    /// Let R run again (stopped since its last request, see [`meter::stop_group`]). Only
    /// R: whatever else a request left was killed at its end. A child that is gone is
    /// no error here: the request finds out and says why.
    fn resume(&self) {
        rustix::process::pidfd_send_signal(&self.pidfd, rustix::process::Signal::CONT).ok();
    }

    /// SIGKILL the child (its group dies with it, killed by the zygote on reaping).
    pub fn kill(&self) {
        // ESRCH (already gone) is the only expected failure and needs no action.
        rustix::process::pidfd_send_signal(&self.pidfd, rustix::process::Signal::KILL).ok();
    }

    /// Run one request. The child stays usable afterwards unless the result's outcome
    /// says it died (anything but `ok`/`error`, or a `quit()`), see [`Self::is_alive`].
    pub fn execute(&mut self, request: Request<'_>) -> Result<EvalResult, EngineError> {
        if !self.is_alive() {
            return Err(EngineError::Setup("the sandbox child is no longer running".into()));
        }
        self.resume();
        let start = Instant::now();
        self.output.clear();
        let stream = request.on_event.is_some();
        let mut ignore = |_: Event<'_>| {};
        let emit: &mut dyn FnMut(Event<'_>) = match request.on_event {
            Some(f) => f,
            None => &mut ignore,
        };
        let outgoing = encode_request(&ChildRequest::Eval {
            code: request.code.to_string(),
            stream,
            args: request.args.to_vec(),
            echo: request.echo,
            functions: request.functions.map(<[String]>::to_vec),
            globals: request.globals.clone(),
            typed: request.typed,
        });
        let max_output = usize::try_from(request.max_output).unwrap_or(usize::MAX);
        let limits = (request.cpu_limit, request.memory_limit);
        let mut run = Execution::new(None, start, start + request.timeout, max_output, outgoing, limits);
        run.interrupt_on_timeout = request.interrupt_on_timeout;
        // The proxy serves the sandbox during evaluations only, every connection ending
        // at the request's deadline; between requests nothing of the sandbox runs.
        if let Some(proxy) = &self.proxy {
            proxy.begin_request(Some(run.deadline));
        }
        // An interrupt asked for before this request is not for it.
        self.interrupter.take_request();
        // Interrupts reach the child only while this request runs, whichever way it ends.
        let _running = self.interrupter.running();
        let mut bridge = ToolBridge {
            tools: request.tools,
            max_calls: request.max_tool_calls,
            max_message: request.max_tool_message,
            observer: request.observer,
            calls: 0,
            cap_exceeded: false,
        };
        let driven = self.drive(&mut run, &mut bridge, stream, &mut *emit);
        let network = self.proxy.as_ref().map(egress::EgressHandle::end_request).unwrap_or_default();
        driven?;
        let mut result = self.result(run, start, request.cpu_limit, bridge.cap_exceeded);
        explain_denials(&mut result, &network);
        result.network = network;
        Ok(result)
    }

    /// Run one request to its end: its deadline, the meter, violations, output, tool
    /// calls, and at its end the clean-up of whatever R left running. Every exchange
    /// with a child that may run code goes through here.
    fn drive(
        &mut self,
        run: &mut Execution,
        bridge: &mut ToolBridge<'_, '_>,
        stream: bool,
        emit: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), EngineError> {
        while !self.finished(run)? {
            let pollfds = self.wait(run);
            if pollfds[WAKE].revents != 0 && self.interrupter.take_request() && run.interrupted_at.is_none() {
                run.interrupted_at = Some(Instant::now());
            }
            self.on_output(run, &pollfds);
            if stream {
                self.stream_pipes(run, &mut *emit);
            }
            if pollfds[VIOLATIONS].revents != 0 {
                self.on_violation_channel(run, pollfds[VIOLATIONS].revents);
            }
            if let Some(why) = self.violations.learning_lost().filter(|_| run.killed.is_none()) {
                self.stop(run, KillReason::ReporterLost(why));
            }
            self.on_control(run, &pollfds, bridge, &mut *emit);
            if run.exited_at.is_none() && pollfds[PIDFD].revents != 0 {
                run.exited_at = Some(Instant::now());
                self.dead = true;
            }
            self.meter_sample(run);
        }
        if stream {
            // What the last read (in `finished`) collected after the final round: a
            // stream ends with everything the result holds.
            self.stream_pipes(run, &mut *emit);
        }
        Ok(())
    }

    /// When it is due: look for processes besides R, and once there are, read the
    /// meter and stop the sandbox over a total.
    fn meter_sample(&mut self, run: &mut Execution) {
        let now = Instant::now();
        if now < run.next_sample || run.killed.is_some() || run.exited_at.is_some() {
            return;
        }
        run.next_sample = now + meter::INTERVAL;
        let Some(meter) = &self.meter else { return };
        if !self.forked {
            match meter.has_company() {
                Ok(company) => self.forked = company,
                Err(e) => return self.stop(run, KillReason::ReporterLost(format!("the meter failed: {e}"))),
            }
            if !self.forked {
                return;
            }
        }
        self.read_meter(run, false);
    }

    /// Read the whole group once: record the totals, and stop the sandbox over a limit.
    /// `last`: the request's last reading, whose memory is always read afresh.
    fn read_meter(&mut self, run: &mut Execution, last: bool) {
        let Some(meter) = &self.meter else { return };
        match meter.sample(last) {
            Ok(sample) => {
                let added = meter.added_memory(&sample);
                run.metered_cpu_ms = Some(sample.cpu_ms);
                run.metered_memory_peak = run.metered_memory_peak.max(added);
                if run.cpu_limit_ms.is_some_and(|limit| sample.cpu_ms > limit) {
                    self.stop(run, KillReason::CpuLimit);
                } else if run.memory_limit.is_some_and(|limit| added > limit) {
                    self.stop(run, KillReason::MemoryLimit);
                }
            }
            Err(e) => self.stop(run, KillReason::ReporterLost(format!("the meter failed: {e}"))),
        }
    }

    /// Kill the child for `reason`, unless an earlier reason already did.
    fn stop(&self, run: &mut Execution, reason: KillReason) {
        if run.killed.is_none() {
            run.killed = Some(reason);
            self.kill();
        }
    }

    /// Deadline, interrupt grace, exit report, and whether the request is over.
    fn finished(&mut self, run: &mut Execution) -> Result<bool, EngineError> {
        let now = Instant::now();
        if run.exited_at.is_none() && now >= run.deadline && !run.timed_out {
            run.timed_out = true;
            if run.interrupt_on_timeout && run.interrupted_at.is_none() && self.interrupter.signal() {
                run.interrupted_at = Some(now);
            } else {
                self.stop(run, KillReason::Timeout);
            }
        }
        if let Some(at) = run.interrupted_at {
            if run.evaluated.is_none() && run.exited_at.is_none() && now >= at + INTERRUPT_GRACE {
                let reason = if run.timed_out { KillReason::Timeout } else { KillReason::InterruptTimeout };
                self.stop(run, reason);
            }
        }
        if run.exited_at.is_some() && self.exit.is_none() {
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
        if run.evaluated.is_some() && run.exited_at.is_none() && run.killed.is_none() {
            // Nothing of the sandbox runs between requests: stop it all first.
            match self.meter.as_ref().map(meter::stop_group) {
                // No process is left in the group: R ended right after its report
                // (`q()` reports, then exits, and the zygote may reap it before this
                // loop has seen the exit). Nothing runs; the exit comes next.
                Some(Err(e)) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(false),
                Some(Err(e)) => {
                    self.stop(
                        run,
                        KillReason::ReporterLost(format!("could not stop the sandbox after the request: {e}")),
                    );
                    return Ok(false);
                }
                _ => {}
            }
            self.output.pump(0, run.max_output);
            // What R left running is not the session's: nothing but R may run (or hold
            // the channel) between requests. A process made (or reaped) since the last
            // sample is found here, and the group read once more: its totals are the
            // result's, and a total over a limit still stops the sandbox.
            if let Some(company) = self.meter.as_ref().map(Meter::has_company) {
                let left = match company {
                    Ok(company) => self.forked || company,
                    Err(e) => {
                        self.stop(run, KillReason::ReporterLost(format!("the meter failed: {e}")));
                        return Ok(false);
                    }
                };
                if left {
                    self.read_meter(run, true);
                    if run.killed.is_some() {
                        return Ok(false);
                    }
                }
                let meter = self.meter.as_ref().expect("checked above");
                if left {
                    if let Err(e) = meter::kill_others(meter) {
                        self.stop(
                            run,
                            KillReason::ReporterLost(format!("could not end the processes R left running: {e}")),
                        );
                        return Ok(false);
                    }
                }
                self.forked = false;
            }
            return Ok(true);
        }
        if self.exit.is_some() && self.output.closed() && self.ctl.is_none() {
            return Ok(true);
        }
        if let Some(t) = run.exited_at {
            if now >= t + EXIT_GRACE {
                if self.exit.is_none() {
                    self.dead = true;
                    return Err(EngineError::ZygoteGone("no exit report for a finished child".into()));
                }
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Poll everything the request waits on, until something is ready or it is time
    /// to look at the deadline again.
    fn wait(&self, run: &Execution) -> [libc::pollfd; 6] {
        let poll = |fd: i32, events: i16| libc::pollfd { fd, events, revents: 0 };
        let ctl_events = if run.outgoing.is_empty() { libc::POLLIN } else { libc::POLLIN | libc::POLLOUT };
        let mut pollfds = [
            poll(self.output.stdout.poll_fd(), libc::POLLIN),
            poll(self.output.stderr.poll_fd(), libc::POLLIN),
            poll(self.violations.poll_fd(), libc::POLLIN),
            poll(self.ctl.as_ref().map_or(-1, |c| c.as_raw_fd()), ctl_events),
            poll(if run.exited_at.is_none() { self.pidfd.as_raw_fd() } else { -1 }, libc::POLLIN),
            poll(self.interrupter.wake_fd(), libc::POLLIN),
        ];
        let wait = if run.exited_at.is_some() {
            Duration::from_millis(5)
        } else if run.killed.is_some() {
            Duration::from_millis(50)
        } else {
            let until = match run.interrupted_at {
                Some(at) => (at + INTERRUPT_GRACE).min(run.deadline.max(at)),
                None => run.deadline,
            };
            let until = if self.meter.is_some() { until.min(run.next_sample) } else { until };
            until.saturating_duration_since(Instant::now())
        };
        let wait_ms = wait.as_millis().clamp(1, i32::MAX as u128) as i32;
        // libc, not rustix: absent ends are -1 entries, which poll skips and rustix's
        // `PollFd` (a borrowed fd each) cannot hold; the indices above name each entry.
        // SAFETY: pollfds is a valid array; negative fds are ignored by poll.
        let n = unsafe { libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, wait_ms) };
        if n < 0 {
            // EINTR: nothing is ready; the caller looks at the deadline and polls again.
            pollfds.iter_mut().for_each(|p| p.revents = 0);
        }
        pollfds
    }

    fn on_output(&mut self, run: &mut Execution, pollfds: &[libc::pollfd; 6]) {
        let readable = pollfds[STDOUT].revents != 0 || pollfds[STDERR].revents != 0 || run.exited_at.is_some();
        if readable && self.output.pump(self.reports.buffered(), run.max_output) > run.max_output {
            self.stop(run, KillReason::OutputLimit);
        }
    }

    /// Hand new stdout and stderr bytes to the event sink (whole UTF-8 characters).
    fn stream_pipes(&mut self, run: &mut Execution, emit: &mut dyn FnMut(Event<'_>)) {
        let streams =
            [(&self.output.stdout.data, OutputStream::Stdout), (&self.output.stderr.data, OutputStream::Stderr)];
        for (i, (data, stream)) in streams.into_iter().enumerate() {
            let fresh = &data[run.streamed[i]..];
            let complete = match std::str::from_utf8(fresh) {
                Ok(_) => fresh.len(),
                // Keep an incomplete character at the end for the next read.
                Err(e) if e.error_len().is_none() => e.valid_up_to(),
                Err(_) => fresh.len(),
            };
            if complete > 0 {
                emit(Event::Output { stream, text: &String::from_utf8_lossy(&fresh[..complete]) });
                run.streamed[i] += complete;
            }
        }
    }

    fn on_violation_channel(&mut self, run: &mut Execution, revents: i16) {
        match self.violations.service(revents) {
            Watch::Quiet => {}
            Watch::Violation => self.stop(run, KillReason::Violation),
            Watch::Lost(why) => self.stop(run, KillReason::ReporterLost(why)),
        }
    }

    /// Write pending frames, read reports, answer tool calls.
    fn on_control(
        &mut self,
        run: &mut Execution,
        pollfds: &[libc::pollfd; 6],
        bridge: &mut ToolBridge<'_, '_>,
        emit: &mut dyn FnMut(Event<'_>),
    ) {
        let Some(stream) = self.ctl.as_mut() else { return };
        if pollfds[CONTROL].revents & libc::POLLOUT != 0 && !run.outgoing.is_empty() {
            match stream.write(&run.outgoing) {
                Ok(n) => {
                    run.outgoing.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The child is gone before reading; its exit says why.
                Err(_) => run.outgoing.clear(),
            }
        }
        if pollfds[CONTROL].revents == 0 && run.exited_at.is_none() {
            return;
        }
        let mut buf = streams::chunk();
        let mut read = 0;
        // Bounded per round: the loop returns to the deadline and the other fds, and the
        // buffer is checked against the output limit after each chunk.
        while read < READ_BUDGET && self.output.kept() + self.reports.buffered() <= run.max_output {
            match rustix::io::read(&*stream, &mut buf).map(|(filled, _)| &*filled) {
                Ok([]) => {
                    self.ctl = None;
                    break;
                }
                Ok(bytes) => {
                    self.reports.push(bytes);
                    read += bytes.len();
                }
                // Nothing more yet, or a signal: the loop polls again.
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => break,
                // A reset channel: the child is going; its exit says why.
                Err(_) => {
                    self.ctl = None;
                    break;
                }
            }
        }
        if self.output.kept() + self.reports.buffered() > run.max_output {
            self.stop(run, KillReason::OutputLimit);
            // Nothing more of this child's is read (the loop above reads nothing over the
            // limit): its channel goes now. Left open, it stayed readable, so every poll
            // returned at once and the supervisor spun a core until the exit grace ended
            // the request (5 s more for every output limit reached through a result).
            self.ctl = None;
        }
        loop {
            match self.reports.next_report() {
                Ok(None) => break,
                Ok(Some(ChildReport::ToolCall { call, tool, args })) => {
                    let reply = bridge.answer(call, &tool, &args);
                    run.outgoing.extend(encode_request(&reply));
                    if run.outgoing.len() > MAX_UNREAD_REPLIES {
                        run.protocol_error =
                            Some(format!("it left {} bytes of tool replies unread", run.outgoing.len()));
                        break;
                    }
                }
                Ok(Some(done @ (ChildReport::Evaluated { .. } | ChildReport::Quit { .. })))
                    if run.awaiting.is_none() =>
                {
                    run.evaluated = Some(done)
                }
                // Between evaluations: the one answer (its kind is the caller's to check).
                Ok(Some(answer)) if run.awaiting.is_some() && !matches!(answer, ChildReport::Output { .. }) => {
                    run.evaluated = Some(answer)
                }
                Ok(Some(ChildReport::Output { stream, text })) => match OutputStream::from_child(&stream) {
                    Some(_) if self.output.kept() + run.streamed_reports + text.len() > run.max_output => {
                        self.stop(run, KillReason::OutputLimit);
                        break;
                    }
                    Some(stream) => {
                        run.streamed_reports += text.len();
                        emit(Event::Output { stream, text: &text })
                    }
                    None => {
                        run.protocol_error = Some(format!("output on an unknown stream {stream:?}"));
                        break;
                    }
                },
                Ok(Some(other)) => {
                    run.protocol_error = Some(format!("expected evaluated, quit or tool_call, got {}", other.tag()));
                    break;
                }
                Err(e) => {
                    run.protocol_error = Some(e.to_string());
                    break;
                }
            }
        }
        if run.protocol_error.is_some() {
            self.stop(run, KillReason::Protocol);
        }
    }

    fn result(&mut self, mut run: Execution, start: Instant, cpu_limit: Option<u64>, cap_exceeded: bool) -> EvalResult {
        if run.killed == Some(KillReason::OutputLimit) {
            // The limit covers the result too: nothing past it is reported, however
            // much of the result frame had arrived.
            run.evaluated = None;
        }
        let quit = matches!(run.evaluated, Some(ChildReport::Quit { .. }));
        let mut result = compose(Observed {
            killed: run.killed,
            evaluated: run.evaluated,
            exit: self.exit.as_ref(),
            stdout: std::mem::take(&mut self.output.stdout.data),
            stderr: std::mem::take(&mut self.output.stderr.data),
            violation: self.violations.syscall,
            protocol_error: run.protocol_error,
            wall_ms: start.elapsed().as_millis() as u64,
            cpu_limit,
            timed_out: run.timed_out,
        });
        result.layers = Some(self.layers.clone());
        result.usage.lockdown_us = Some(self.lockdown_us);
        result.usage.sandbox_cpu_ms = run.metered_cpu_ms;
        result.usage.sandbox_memory_kb = run.metered_cpu_ms.map(|_| run.metered_memory_peak / 1024);
        result.usage.memory_accounting = self.meter.as_ref().map(Meter::accounting);
        if quit {
            // quit() ends the R process; the child is no longer usable.
            self.kill();
            self.dead = true;
        }
        result.tool_call_limit_exceeded = cap_exceeded;
        result.learning = self.violations.take_learning_report();
        result.refused_network = self.violations.take_refused_network();
        if result.refused_network {
            if let Some(error) = result.error.as_mut() {
                error.message = format!("{}\nnetwork: {}", error.message.trim_end(), EvalResult::NO_NETWORK);
            }
        }
        result
    }
}

/// A denial reaches the R user as an error naming the host and the rule: libcurl only
/// says "CONNECT tunnel failed, response 403" (or R "cannot open URL"), so the reasons
/// of this request's denied connections, and of those a cap or a timeout ended, are
/// added to an R error's message, once each.
fn explain_denials(result: &mut EvalResult, network: &[egress::ConnectionRecord]) {
    let Some(error) = result.error.as_mut() else { return };
    let mut reasons: Vec<&str> = Vec::new();
    for reason in network.iter().filter_map(|r| r.reason.as_deref()) {
        if !reasons.contains(&reason) {
            reasons.push(reason);
        }
    }
    if !reasons.is_empty() {
        error.message = format!("{}\nnetwork: {}", error.message.trim_end(), reasons.join("; "));
    }
}

/// A lockdown failure, as the layer refused when the operator can choose to go without it.
fn setup_failure(error: String) -> EngineError {
    let refused = |e: &str| e.contains("Operation not permitted") || e.contains("Permission denied");
    let layer = if error.contains("failed to create namespaces") && refused(&error) {
        Some(RefusedLayer::Namespaces)
    } else if error.contains("does not enforce Landlock") {
        Some(RefusedLayer::Landlock)
    } else if error.contains("root directory is not a mount point") {
        Some(RefusedLayer::PrivateRoot)
    } else {
        None
    };
    match layer {
        Some(layer) => EngineError::LayerRefused { layer, error },
        None => EngineError::Setup(error),
    }
}

fn tool_stubs(tools: &[Tool]) -> Vec<ToolStub> {
    tools.iter().map(|t| ToolStub { name: t.spec.name.clone(), args: t.spec.args.keys().cloned().collect() }).collect()
}

impl Drop for SandboxChild {
    fn drop(&mut self) {
        self.kill();
        // Wait (briefly) until the zygote has reaped it and killed its group, so the
        // workspace is no longer in use when the caller removes it.
        if self.exit.is_none() {
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
