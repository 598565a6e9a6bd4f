//! rsandbox: run untrusted R code inside kernel-enforced isolation at fork speed.
//!
//! This crate is the supervisor side of the engine (it never links R): it starts an
//! embedded-R zygote (`rsandbox-zygote`), asks it to fork one locked-down child per
//! evaluation or session, enforces wall-clock and output limits, answers tool calls,
//! writes the audit log, and reports what happened.
//!
//! ```no_run
//! let engine = rsandbox::Engine::start(rsandbox::EngineConfig::default())?;
//! let result = engine.eval("1 + 1", &rsandbox::EvalOptions::default())?;
//! assert_eq!(result.value, serde_json::json!(2));
//! # Ok::<(), rsandbox::EngineError>(())
//! ```
#![deny(missing_docs)]

/// A line for the operator on stderr, from threads that outlive any request (reaper,
/// warm pool, zygote watcher). Unlike `eprintln!` it never panics: a server whose stderr
/// was closed (a parent that read only its first line) keeps serving.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use note;

pub mod audit;
pub mod child;
pub mod config;
pub mod errors;
pub mod events;
pub mod exec;
mod files;
pub mod identity;
pub mod ids;
pub mod learn;
pub mod limits;
pub mod meter;
pub mod network;
pub mod options;
pub mod pool;
pub mod profile;
pub mod r_policy;
pub mod result;
pub mod session;
pub mod system_trees;
pub mod tools;
pub mod values;
mod warm;
pub mod workspace;
pub mod zygote;

pub use config::EngineConfig;
pub use egress::Allowlist;
pub use errors::{EngineError, InputError, RefusedLayer};
pub use events::{Event, OutputStream};
pub use limits::{parse_duration, Limits};
pub use lockdown::{Applied, LandlockEnforcement};
pub use network::Network;
pub use options::{parse_size, EvalOptions};
pub use pool::{Pool, PoolStatus, PooledSession};
pub use result::{EvalResult, Outcome, WorkspaceFile};
pub use session::{ExecuteOptions, Session};
pub use tools::{quote_excerpt, ArgType, Tool, ToolSpec};

use audit::AuditLog;
use child::{Request, SandboxChild, ToolEvent};
use serde_json::json;
use std::sync::{Arc, Mutex, Weak};
use warm::WarmSets;
use workspace::{Workspace, WorkspaceRoot};
use zygote::{Zygote, ZygoteInfo};

/// A running engine: one zygote, ready to fork isolated R processes. Cheap to clone;
/// thread-safe: evaluations from several threads run concurrently.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<EngineInner>,
}

struct EngineInner {
    /// First field: dropped first, so waiting children go while the rest still exists.
    warm: Mutex<WarmSets>,
    config: EngineConfig,
    zygote: Mutex<Arc<Zygote>>,
    workspaces: WorkspaceRoot,
    audit: Option<AuditLog>,
    reaper: Arc<Reaper>,
    /// The profile's package allowlist with dependencies (`None`: every package).
    allowed_packages: Option<std::collections::BTreeSet<String>>,
    /// What the profile lets children execute, with interpreters (read once, here).
    programs: Vec<std::path::PathBuf>,
    /// Requests waiting while a child is forked for them (none was ready): the queue an
    /// autoscaler watches.
    waiting: std::sync::atomic::AtomicUsize,
    /// The proxy of every network sandbox, started with the first one.
    egress: std::sync::OnceLock<egress::Egress>,
}

/// A child ready for requests, with the workspace it owns. Fields drop in order: the
/// child (killed, and waited for until the zygote has reaped it), then its warm-set
/// place, then the directory.
pub(crate) struct Prepared {
    pub(crate) child: SandboxChild,
    /// Taken from a warm set for a request: dropped once the child is gone, which lets
    /// its replacement start ([`warm::Serving`]). Not sooner: on two cores the
    /// replacement's preparation and fork, started at the report, ran beside the dying
    /// child and the answer still on its way (a fresh `1+1` through `serve --stdio`,
    /// two servers alternating, 100 ms apart: p50 1.62 -> 1.44 ms, p75 2.55 -> 1.71;
    /// 400 back to back on one server: 219-229 -> 239-250 evaluations/s).
    pub(crate) serving: Option<warm::Serving>,
    /// Held for its `Drop`: it goes after the child.
    #[allow(dead_code)]
    pub(crate) workspace: Workspace,
}

impl Engine {
    /// Start the zygote (R start-up plus preloads) and wait until it is ready.
    pub fn start(config: EngineConfig) -> Result<Engine, EngineError> {
        if let Some(bad) = config.preload.iter().find(|p| !is_package_name(p)) {
            return Err(InputError::BadPackage(bad.clone()).into());
        }
        let fixed_identity = config.checked_identity()?;
        let audit = config.audit_log.as_deref().map(AuditLog::open).transpose()?;
        let binary = zygote::locate_zygote(config.zygote_path.as_deref())?;
        let disk_cap = config.max_total_disk.unwrap_or_else(workspace::default_disk_cap);
        let workspaces = WorkspaceRoot::create(config.workspace_root.as_deref(), config.uid_base, disk_cap)?
            .with_mount_points_in_memory(&config)?
            .with_fixed_identity(fixed_identity);
        workspaces.sweep_abandoned();
        let reaper = Reaper::start();
        let zygote = start_zygote(&binary, &config, workspaces.path(), &reaper)?;
        let allowed_packages = config.profile.allowed_packages(&r_policy::libraries(zygote.info()))?;
        if allowed_packages.is_some() && !(config.namespaces && EvalOptions::default().disk.is_some()) {
            // Fail closed: without the private root every package stays readable.
            return Err(InputError::Profile {
                origin: config.profile.name.clone(),
                message: "a package allowlist needs the private root, which needs namespaces (not --no-namespaces)"
                    .into(),
            }
            .into());
        }
        if config.profile.network.is_some() && !config.namespaces {
            return Err(network::needs_namespaces().into());
        }
        let programs = r_policy::executables(zygote.info(), &config.profile.exec);
        let inner = EngineInner {
            warm: Mutex::default(),
            config,
            zygote: Mutex::new(Arc::new(zygote)),
            workspaces,
            audit,
            reaper,
            allowed_packages,
            programs,
            waiting: std::sync::atomic::AtomicUsize::new(0),
            egress: std::sync::OnceLock::new(),
        };
        let engine = Engine { inner: Arc::new(inner) };
        if engine.inner.config.prefork > 0 {
            // The default limits are what most requests use: have their children ready.
            engine.warm_set(&engine.with_network_resolved(&EvalOptions::default())?);
        }
        Ok(engine)
    }

    /// The engine again, from a thread that must not keep it alive on its own.
    pub(crate) fn upgrade(weak: &Weak<EngineInner>) -> Option<Engine> {
        weak.upgrade().map(|inner| Engine { inner })
    }

    /// Stop forking children ahead of requests, and wait (a few seconds at most) for the
    /// forks under way: afterwards no thread of the engine's own holds it, so dropping
    /// the caller's last handle ends the zygote and removes the workspaces' directories
    /// in the caller's thread, before the process exits (a fork finishing in a
    /// background thread would otherwise hold the engine past the process's exit, and
    /// its directories stayed behind). The fronts call it when they stop serving; later
    /// requests still work, each forking its own child.
    pub fn shutdown(&self) {
        let sets = self.inner.warm.lock().map(|w| w.all()).unwrap_or_default();
        for set in sets {
            set.close(std::time::Duration::from_secs(5));
        }
    }

    fn warm_set(&self, options: &EvalOptions) -> Arc<warm::WarmSet> {
        self.inner.warm.lock().expect("warm sets").set_for(self, options, self.inner.config.prefork)
    }

    /// A child with these limits and tools: a pre-forked one when the engine keeps
    /// children ready (its tools are defined now), else forked on demand.
    pub(crate) fn take_child(&self, options: &EvalOptions, tools: &[Tool]) -> Result<Prepared, EngineError> {
        let resolved = self.with_network_resolved(options)?;
        let options = &resolved;
        options.validate()?;
        if self.inner.config.prefork == 0 {
            return self.prepare_waiting(options, tools);
        }
        let Some(mut prepared) = self.warm_set(options).take() else {
            return self.prepare_waiting(options, tools);
        };
        if let Err(e) = prepared.child.define_tools(tools) {
            self.retire(prepared);
            return Err(e);
        }
        Ok(prepared)
    }

    /// A child forked on demand, the request counted in [`WarmStatus::waiting`] meanwhile.
    fn prepare_waiting(&self, options: &EvalOptions, tools: &[Tool]) -> Result<Prepared, EngineError> {
        use std::sync::atomic::Ordering;
        struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.inner.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.inner.waiting);
        self.prepare(options, tools)
    }

    /// Children waiting ahead of requests, over all limit sets, and requests waiting
    /// for a child.
    pub fn warm_status(&self) -> WarmStatus {
        let (idle, dead, settled, limit_sets) = self.inner.warm.lock().expect("warm sets").status();
        let waiting = self.inner.waiting.load(std::sync::atomic::Ordering::SeqCst);
        WarmStatus { idle, dead, settled, limit_sets, per_set: self.inner.config.prefork, waiting }
    }

    /// What the zygote reported (R version, R home, library paths).
    pub fn info(&self) -> ZygoteInfo {
        self.inner.zygote.lock().expect("zygote").info().clone()
    }

    /// The files and trees an evaluation may execute (the profile's `exec`, R's `bin`
    /// and their interpreters; empty: no program runs).
    pub fn programs(&self) -> Vec<std::path::PathBuf> {
        self.inner.programs.clone()
    }

    /// The engine's configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// A fresh id for a session or evaluation (audit log, protocol).
    pub(crate) fn new_id(&self, prefix: &str) -> String {
        ids::other_id(prefix)
    }

    /// The running zygote, restarted first if it has died.
    fn live_zygote(&self) -> Result<Arc<Zygote>, EngineError> {
        let mut current = self.inner.zygote.lock().expect("zygote");
        if !current.is_alive() {
            let binary = zygote::locate_zygote(self.inner.config.zygote_path.as_deref())?;
            *current =
                Arc::new(start_zygote(&binary, &self.inner.config, self.inner.workspaces.path(), &self.inner.reaper)?);
        }
        Ok(current.clone())
    }

    /// Fork a child with these limits and tools, locked down and waiting for requests.
    pub(crate) fn prepare(&self, options: &EvalOptions, tools: &[Tool]) -> Result<Prepared, EngineError> {
        self.prepare_child(options, tools, false)
    }

    fn prepare_child(&self, options: &EvalOptions, tools: &[Tool], warm_up: bool) -> Result<Prepared, EngineError> {
        let network = self.network_for(options)?;
        let resolved = self.with_network_resolved(options)?;
        let options = &resolved;
        options.validate()?;
        let zygote = self.live_zygote()?;
        let workspace = self.inner.workspaces.workspace(options.disk.unwrap_or(0))?;
        let info = zygote.info();
        let mut policy = r_policy::r_child_policy(
            info,
            &workspace,
            options,
            &self.inner.config,
            self.inner.allowed_packages.as_ref(),
            &self.inner.programs,
        );
        policy.network = network.is_some();
        let env = r_policy::r_child_environment(info, &workspace);
        let proxy = match &network {
            None => None,
            Some(_) if !self.inner.config.namespaces => return Err(network::needs_namespaces().into()),
            Some(network) => Some(child::Proxy { egress: self.egress()?, policy: Arc::new(network.policy()?) }),
        };
        let child = SandboxChild::spawn(&zygote, policy, workspace.path(), env, tools, proxy, warm_up)?;
        Ok(Prepared { serving: None, child, workspace })
    }

    /// The network allowlist a sandbox with these options gets (`None`: no network):
    /// the profile's `[network]`, narrowed by the request's own (`options.network`; an
    /// empty `allow` turns it off). A request may never widen it: a host outside it,
    /// or any host where the profile has no network, is bad input naming it.
    pub fn network_for(&self, options: &EvalOptions) -> Result<Option<network::Network>, EngineError> {
        let ceiling = self.inner.config.profile.network.as_ref();
        let network = match (&options.network, ceiling) {
            (None, ceiling) => ceiling.cloned(),
            (Some(asked), Some(ceiling)) => Some(ceiling.narrowed(asked)?),
            (Some(asked), None) if asked.is_on() => {
                return Err(InputError::BadNetwork {
                    message: format!(
                        "network.allow {:?}: this server has no network allowlist (its profile has no [network] table), so a request cannot ask for one",
                        asked.allow
                    ),
                }
                .into())
            }
            (Some(_), None) => None,
        };
        // Learning: a sandbox always gets the proxy, so that every host the code tries
        // is refused and recorded (`learn` adds them), even with nothing allowed yet;
        // without namespaces there can be none (no host is learned then).
        if self.inner.config.learning && self.inner.config.namespaces {
            return Ok(Some(network.unwrap_or_default()));
        }
        Ok(network.filter(network::Network::is_on))
    }

    /// `options` with their network resolved ([`Self::network_for`]; off: an empty
    /// allowlist), so that resolving them again changes nothing and the warm sets tell a
    /// network sandbox from one without.
    fn with_network_resolved(&self, options: &EvalOptions) -> Result<EvalOptions, EngineError> {
        Ok(EvalOptions { network: Some(self.network_for(options)?.unwrap_or_default()), ..options.clone() })
    }

    /// The engine's proxy service, started on first use.
    fn egress(&self) -> Result<&egress::Egress, EngineError> {
        if let Some(running) = self.inner.egress.get() {
            return Ok(running);
        }
        let started = egress::Egress::start().map_err(EngineError::io("start the network proxy"))?;
        // Two threads racing here: one's runtime is dropped, the other's kept.
        Ok(self.inner.egress.get_or_init(|| started))
    }

    /// A prepared child that has already evaluated once (off the request path), so the
    /// first real request does not pay for the pages a first evaluation touches. The
    /// warm-up prints a value, as most requests do: printing touches code and data an
    /// invisible result does not (a fresh `1+1` through `serve --stdio`, p50 over 150
    /// requests 15 ms apart, three interleaved runs: 2.30-2.40 ms after `invisible(NULL)`,
    /// 2.02-2.15 ms after `1 + 1`). The child runs it on its own before its lockdown (its
    /// output goes to the zygote's `/dev/null`): a warm-up sent as a request cost the
    /// supervisor a whole request's round trip, meter reading and thread wake-ups for
    /// every child forked ahead.
    pub(crate) fn prepare_warm(&self, options: &EvalOptions) -> Result<Prepared, EngineError> {
        self.prepare_child(options, &[], true)
    }

    /// Run one request on a prepared child, with audit records around it.
    pub(crate) fn run(&self, prepared: &mut Prepared, id: &str, spec: Run<'_>) -> Result<EvalResult, EngineError> {
        let Run {
            code,
            options,
            tools,
            max_tool_calls,
            mut on_event,
            interrupt_on_timeout,
            args,
            echo,
            globals,
            typed,
        } = spec;
        options::validate_code(code)?;
        values::validate_globals(globals)?;
        let audit = self.inner.audit.as_ref();
        if let Some(log) = audit {
            log.execute_start(id, code);
        }
        let mut observer = |event: ToolEvent<'_>| {
            if let Some(log) = audit {
                match event {
                    ToolEvent::Call { tool, args, refused } => log.tool_call(id, tool, args, refused),
                    ToolEvent::Result { tool, ok, error } => {
                        log.record("tool_result", id, json!({"tool": tool, "ok": ok, "error": error}))
                    }
                }
            }
        };
        let result = prepared.child.execute(Request {
            code,
            timeout: options.timeout,
            max_output: options.max_output,
            cpu_limit: options.cpu_seconds,
            memory_limit: options.memory,
            tools,
            max_tool_calls,
            max_tool_message: tools::DEFAULT_MAX_TOOL_MESSAGE,
            observer: &mut observer,
            // Shortened to this call's lifetime, which the observer's borrows set.
            on_event: on_event.as_mut().map(|f| &mut **f as &mut dyn FnMut(Event<'_>)),
            interrupt_on_timeout,
            args,
            echo,
            functions: self.inner.config.profile.functions.as_deref(),
            globals,
            typed,
        })?;
        if result.refused {
            let message = result.error.map_or_else(|| "refused by the function allowlist".to_string(), |e| e.message);
            if let Some(log) = audit {
                log.record("refused", id, json!({"error": message}));
            }
            return Err(InputError::NotAllowed(message).into());
        }
        if let Some(log) = audit {
            if let Some(v) = &result.violation {
                log.record("violation", id, json!({"syscall": v.syscall, "number": v.number}));
            }
            // Every connection the sandbox opened to its proxy, allowed or denied (the
            // proxy bounds what it reports: host names cut and made printable).
            for connection in &result.network {
                log.record("network", id, json!(connection));
            }
            if !matches!(result.outcome, Outcome::Ok | Outcome::Error | Outcome::Violation) {
                log.record("limit", id, json!({"outcome": result.outcome}));
            }
            // securer's event names, so its users' log readers keep working.
            let event = match result.outcome {
                Outcome::Error => "execute_error",
                Outcome::Timeout => "execute_timeout",
                _ => "execute_complete",
            };
            let mut fields = json!({"outcome": result.outcome, "usage": result.usage});
            if let Some(error) = &result.error {
                // Text the sandbox chose: an excerpt, as for tool calls.
                fields["error"] = json!(error.message.chars().take(500).collect::<String>());
            }
            log.record(event, id, fields);
        }
        Ok(result)
    }

    /// Audit a session event (start, close, reset).
    pub(crate) fn audit(&self, event: &str, id: &str, fields: serde_json::Value) {
        if let Some(log) = &self.inner.audit {
            log.record(event, id, fields);
        }
    }

    /// Start one sandbox with the default limits and report what it applied: a server
    /// calls this before it serves, so that an environment that cannot give the required
    /// layers refuses at start (fail closed) instead of failing every request.
    pub fn verify_lockdown(&self) -> Result<lockdown::Applied, EngineError> {
        let result = self.eval("invisible(NULL)", &EvalOptions::default())?;
        match (result.outcome, result.layers) {
            (Outcome::Ok, Some(layers)) => Ok(layers),
            (outcome, _) => Err(EngineError::Setup(format!(
                "a test sandbox ended {}: {}",
                outcome.name(),
                result.error.map_or_else(|| "no detail".to_string(), |e| e.message)
            ))),
        }
    }

    /// Evaluate `code` in a fresh, isolated R process (no state carried over).
    pub fn eval(&self, code: &str, options: &EvalOptions) -> Result<EvalResult, EngineError> {
        self.eval_request(EvalRequest::new(code, options.clone()))
    }

    /// Evaluate in a fresh sandbox with files placed in its workspace first, files
    /// collected from it after, and output streamed while it runs.
    pub fn eval_request(&self, request: EvalRequest<'_>) -> Result<EvalResult, EngineError> {
        let EvalRequest { code, options, files, collect, args, mut on_event, globals, typed } = request;
        options::validate_code(code)?;
        values::validate_globals(&globals)?;
        let mut prepared = self.take_child(&options, &[])?;
        let id = self.new_id("eval");
        let per_file = options.disk.unwrap_or(u64::MAX).min(options.max_output);
        let result = files
            .iter()
            .try_for_each(|(path, data)| files::put(&mut prepared.child, path, data, per_file).map(drop))
            .and_then(|()| {
                let on_event = on_event.as_mut().map(|f| &mut **f as &mut dyn FnMut(Event<'_>));
                let run = Run { on_event, args: &args, globals: &globals, typed, ..Run::plain(code, &options) };
                self.run(&mut prepared, &id, run)
            })
            .and_then(|mut result| {
                if !collect.is_empty() && prepared.child.is_alive() {
                    let room =
                        options.max_output.saturating_sub(result.stdout.len() as u64 + result.stderr.len() as u64);
                    (result.files, result.files_truncated) = files::collect(&mut prepared.child, &collect, room)?;
                }
                Ok(result)
            });
        self.retire(prepared);
        result
    }

    /// Kill a child now; wait for its exit, let its replacement start and remove its
    /// workspace off the caller's path (a forked R takes milliseconds to tear down).
    pub(crate) fn retire(&self, prepared: Prepared) {
        self.inner.reaper.retire(prepared);
    }

    /// A persistent session with these limits and host tools.
    pub fn session(&self, options: EvalOptions, tools: Vec<Tool>) -> Result<Session, EngineError> {
        Session::start(self.clone(), options, tools)
    }
}

/// One evaluation in a fresh sandbox, with what goes in and comes out besides code.
pub struct EvalRequest<'a> {
    /// R code.
    pub code: &'a str,
    /// Limits.
    pub options: EvalOptions,
    /// Files placed in the workspace before the code runs: (relative path, bytes).
    pub files: Vec<(String, Vec<u8>)>,
    /// Globs over workspace paths whose files come back in `result.files`.
    pub collect: Vec<String>,
    /// `commandArgs(trailingOnly = TRUE)` inside (`rsandbox run FILE -- ARGS`).
    pub args: Vec<String>,
    /// Output streamed while the code runs.
    pub on_event: Option<&'a mut dyn FnMut(Event<'_>)>,
    /// Values bound in the sandbox before the code runs: name to a value in the typed
    /// encoding ([`values`]; checked before anything starts).
    pub globals: serde_json::Map<String, serde_json::Value>,
    /// Also return the value in the typed encoding ([`EvalResult::value_typed`]).
    pub typed: bool,
}

impl<'a> EvalRequest<'a> {
    /// Just code and limits.
    pub fn new(code: &'a str, options: EvalOptions) -> EvalRequest<'a> {
        EvalRequest {
            code,
            options,
            files: Vec::new(),
            collect: Vec::new(),
            args: Vec::new(),
            on_event: None,
            globals: serde_json::Map::new(),
            typed: false,
        }
    }
}

/// No globals (a `Run`'s default).
static NO_GLOBALS: std::sync::LazyLock<serde_json::Map<String, serde_json::Value>> =
    std::sync::LazyLock::new(serde_json::Map::new);

/// One request on a prepared child, as the engine runs it.
pub(crate) struct Run<'a> {
    pub(crate) code: &'a str,
    pub(crate) options: &'a EvalOptions,
    pub(crate) tools: &'a [Tool],
    pub(crate) max_tool_calls: u32,
    pub(crate) on_event: Option<&'a mut dyn FnMut(Event<'_>)>,
    pub(crate) interrupt_on_timeout: bool,
    pub(crate) args: &'a [String],
    pub(crate) echo: bool,
    pub(crate) globals: &'a serde_json::Map<String, serde_json::Value>,
    pub(crate) typed: bool,
}

impl<'a> Run<'a> {
    /// Code and limits; no tools, nothing streamed, killed at the deadline.
    pub(crate) fn plain(code: &'a str, options: &'a EvalOptions) -> Run<'a> {
        Run {
            code,
            options,
            tools: &[],
            max_tool_calls: 0,
            on_event: None,
            interrupt_on_timeout: false,
            args: &[],
            echo: true,
            globals: &NO_GLOBALS,
            typed: false,
        }
    }
}

/// Children an engine keeps ready ([`EngineConfig::prefork`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct WarmStatus {
    /// Forked, locked down and waiting.
    pub idle: usize,
    /// Found dead while waiting and discarded.
    pub dead: usize,
    /// Settled while nobody was waiting for them (their warm-up's garbage collected, so
    /// that a first request takes fewer copy-on-write faults), since the start.
    pub settled: usize,
    /// Limit sets with children kept ready.
    pub limit_sets: usize,
    /// Children kept ready per limit set.
    pub per_set: usize,
    /// Requests waiting while a child is forked for them (none was ready).
    pub waiting: usize,
}

impl Drop for EngineInner {
    fn drop(&mut self) {
        // The replenishers hold the engine weakly; closing the sets stops them.
        self.warm.lock().map(|mut w| w.clear()).ok();
        self.reaper.close();
    }
}

/// A zygote whose children's exit reports wake `reaper`.
fn start_zygote(
    binary: &std::path::Path,
    config: &EngineConfig,
    tmpdir: &std::path::Path,
    reaper: &Arc<Reaper>,
) -> Result<Zygote, EngineError> {
    let zygote = Zygote::start(binary, &config.preload, &config.profile.libraries, config.warm, tmpdir)?;
    let reaper = reaper.clone();
    zygote.on_child_exit(Arc::new(move || reaper.wake.notify_one()));
    Ok(zygote)
}

/// Children retired after their request, until they are gone: a thread of its own drops
/// each (the drop waits for the zygote's report that the child exited; then the child's
/// place in its warm set goes, which lets its replacement start, and then its workspace).
/// A retire kills the child and queues it without waking that thread: on a virtual
/// machine a wake-up of a thread on the other, idle CPU cost the request ~35 µs on its
/// answer's path (an interrupt through the hypervisor). The zygote's event thread wakes
/// it instead when an exit report comes, which follows the kill, off that path.
struct Reaper {
    queue: Mutex<ReaperQueue>,
    wake: std::sync::Condvar,
}

#[derive(Default)]
struct ReaperQueue {
    retired: Vec<Prepared>,
    closed: bool,
}

/// How long the reaper sleeps without a wake-up before it looks at its queue anyway: a
/// report the zygote never sent (it hung) does not leave a workspace behind for good.
const REAPER_RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

impl Reaper {
    fn start() -> Arc<Reaper> {
        let reaper = Arc::new(Reaper { queue: Mutex::default(), wake: std::sync::Condvar::new() });
        let for_thread = reaper.clone();
        std::thread::Builder::new()
            .name("rsandbox-reaper".into())
            .spawn(move || for_thread.run())
            .expect("failed to start the reaper thread");
        reaper
    }

    fn retire(&self, prepared: Prepared) {
        let mut queue = self.queue.lock().expect("reaper");
        if queue.closed {
            // The engine is shutting down: dropping here does the same work.
            drop(queue);
            drop(prepared);
            return;
        }
        // Killed under the lock: the exit report that wakes the reaper cannot be handled
        // before the child is in the queue.
        prepared.child.kill();
        queue.retired.push(prepared);
    }

    fn run(&self) {
        loop {
            let batch = {
                let mut queue = self.queue.lock().expect("reaper");
                while queue.retired.is_empty() && !queue.closed {
                    queue = self.wake.wait_timeout(queue, REAPER_RECHECK).expect("reaper").0;
                }
                if queue.retired.is_empty() {
                    return; // closed, and nothing left
                }
                std::mem::take(&mut queue.retired)
            };
            drop(batch);
        }
    }

    fn close(&self) {
        self.queue.lock().expect("reaper").closed = true;
        self.wake.notify_one();
    }
}

pub use wire::names::is_package_name;
