//! Persistent sessions: one locked-down child that keeps R state between executes.
//!
//! An interrupt ([`Session::interrupt`]) stops the running execute as Ctrl-C does and
//! the session keeps its state; a session's timeout takes the same path first. After a
//! kill (R ignored the interrupt), a limit, a crash, `quit()` or an exceeded tool-call
//! cap the child is replaced by a fresh one (new process, new workspace) and the result
//! says so (`reset: true` with `reset_reason`); the next execute works. An execute (or a
//! file or snapshot request) while another is running on the same session gets
//! [`EngineError::Busy`].

use crate::child::Interrupter;
use crate::errors::EngineError;
use crate::events::Event;
use crate::files;
use crate::options::EvalOptions;
use crate::result::{EvalResult, Outcome, WorkspaceFile};
use crate::tools::Tool;
use crate::{Engine, Prepared, Run};
use serde_json::json;
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Duration;
use wire::messages::FileEntry;

/// Per-execute settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecuteOptions {
    /// Wall-clock limit for this execute.
    pub timeout: Duration,
    /// Tool calls allowed in this execute.
    pub max_tool_calls: u32,
    /// stdout + stderr + result bytes allowed.
    pub max_output: u64,
    /// Print visible values as a console does (the default); `false`: evaluate
    /// silently and return the last value whether visible or not, as `eval()` does
    /// (what securer's users expect).
    pub echo: bool,
    /// Values bound in the session before the code runs (and left there): name to a
    /// value in the typed encoding ([`crate::values`]).
    pub globals: serde_json::Map<String, serde_json::Value>,
    /// Also return the value in the typed encoding ([`EvalResult::value_typed`]).
    pub typed: bool,
}

impl Default for ExecuteOptions {
    fn default() -> Self {
        ExecuteOptions {
            timeout: Duration::from_secs(30),
            max_tool_calls: 100,
            max_output: EvalOptions::default().max_output,
            echo: true,
            globals: serde_json::Map::new(),
            typed: false,
        }
    }
}

/// A persistent, isolated R session.
pub struct Session {
    engine: Engine,
    id: String,
    options: EvalOptions,
    tools: Vec<Tool>,
    current: Mutex<Option<Prepared>>,
    /// The current child's interrupter, reachable while an execute holds `current`.
    interrupter: Mutex<Option<Interrupter>>,
}

impl Session {
    pub(crate) fn start(engine: Engine, options: EvalOptions, tools: Vec<Tool>) -> Result<Session, EngineError> {
        let mut prepared = engine.take_child(&options, &tools)?;
        // The session is this request's answer: the child's replacement may start.
        prepared.serving = None;
        // The one id of this session on every front and in the audit log.
        let id = crate::ids::session_id();
        engine.audit("session_start", &id, json!({"tools": tools.iter().map(|t| &t.spec.name).collect::<Vec<_>>()}));
        let interrupter = Mutex::new(Some(prepared.child.interrupter()));
        Ok(Session { engine, id, options, tools, current: Mutex::new(Some(prepared)), interrupter })
    }

    /// The session's id (audit log, protocol).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Run code in the session. State persists to the next call unless the result says
    /// `reset`.
    pub fn execute(&self, code: &str, options: &ExecuteOptions) -> Result<EvalResult, EngineError> {
        self.execute_streaming(code, options, None)
    }

    /// [`Self::execute`], with output handed to `on_event` while the code runs.
    pub fn execute_streaming(
        &self,
        code: &str,
        options: &ExecuteOptions,
        mut on_event: Option<&mut dyn FnMut(Event<'_>)>,
    ) -> Result<EvalResult, EngineError> {
        let mut slot = self.lock()?;
        let prepared = self.ensure_child(&mut slot)?;
        // The session's own output limit (fixed at its creation) bounds every execute too.
        let max_output = options.max_output.min(self.options.max_output);
        let per_call = EvalOptions { timeout: options.timeout, max_output, ..self.options.clone() };
        let spec = Run {
            tools: &self.tools,
            max_tool_calls: options.max_tool_calls,
            on_event: on_event.as_mut().map(|f| &mut **f as &mut dyn FnMut(Event<'_>)),
            interrupt_on_timeout: true,
            echo: options.echo,
            globals: &options.globals,
            typed: options.typed,
            ..Run::plain(code, &per_call)
        };
        let run = self.engine.run(prepared, &self.id, spec);
        let mut result = match run {
            Ok(r) => r,
            Err(e @ EngineError::Input(_)) => return Err(e),
            Err(e) => {
                self.replace_child(&mut slot, json!({"reason": "engine_error", "error": e.to_string()}));
                return Err(e);
            }
        };
        let alive = slot.as_ref().is_some_and(|p| p.child.is_alive());
        let reason = if result.tool_call_limit_exceeded {
            Some("tool_call_limit".to_string())
        } else if !alive {
            Some(match result.outcome {
                Outcome::Ok | Outcome::Error => "quit".into(),
                Outcome::Interrupted => "interrupt_timeout".into(),
                other => other.name(),
            })
        } else {
            None
        };
        if let Some(reason) = reason {
            self.replace_child(&mut slot, json!({"reason": reason}));
            result.reset = true;
            result.reset_reason = Some(reason);
        }
        Ok(result)
    }

    /// Interrupt the running execute (as Ctrl-C does): it returns outcome `interrupted`
    /// and the session keeps its state; if R does not yield within
    /// [`crate::child::INTERRUPT_GRACE`], the session is reset
    /// (`reset_reason: "interrupt_timeout"`). `false` when nothing could be signalled.
    pub fn interrupt(&self) -> bool {
        let interrupter = self.interrupter.lock().expect("interrupter").clone();
        self.engine.audit("session_interrupt", &self.id, json!({}));
        interrupter.is_some_and(|i| i.interrupt())
    }

    /// Write a file into the session's workspace (parents created). Refused: paths
    /// that are absolute, contain `..`, NUL or a symlink; more than the disk quota or
    /// the output limit.
    pub fn put_file(&self, path: &str, data: &[u8]) -> Result<u64, EngineError> {
        let max = self.options.disk.unwrap_or(u64::MAX).min(self.options.max_output);
        self.with_child(|child| files::put(child, path, data, max))
    }

    /// Read a regular file from the session's workspace (at most the output limit).
    pub fn get_file(&self, path: &str) -> Result<WorkspaceFile, EngineError> {
        let max = self.options.max_output;
        self.with_child(|child| files::get(child, path, max))
    }

    /// The regular files of the session's workspace, and whether the list was cut.
    pub fn list_files(&self) -> Result<(Vec<FileEntry>, bool), EngineError> {
        self.with_child(files::list)
    }

    /// The session's global environment as opaque bytes (base64), and the names of
    /// objects that could not be saved (connections, external pointers). Only ever
    /// read inside a sandbox ([`Engine::restore_session`]).
    pub fn snapshot(&self) -> Result<(String, Vec<String>), EngineError> {
        self.with_child(files::snapshot)
    }

    fn lock(&self) -> Result<MutexGuard<'_, Option<Prepared>>, EngineError> {
        match self.current.try_lock() {
            Ok(guard) => Ok(guard),
            Err(TryLockError::WouldBlock) => Err(EngineError::Busy(self.id.clone())),
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
        }
    }

    fn ensure_child<'g>(
        &self,
        slot: &'g mut MutexGuard<'_, Option<Prepared>>,
    ) -> Result<&'g mut Prepared, EngineError> {
        if slot.is_none() {
            let prepared = self.engine.take_child(&self.options, &self.tools)?;
            *self.interrupter.lock().expect("interrupter") = Some(prepared.child.interrupter());
            **slot = Some(prepared);
        }
        Ok(slot.as_mut().expect("just filled"))
    }

    /// A request between executes; a child that failed it is replaced.
    fn with_child<T>(
        &self,
        op: impl FnOnce(&mut crate::child::SandboxChild) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let mut slot = self.lock()?;
        let prepared = self.ensure_child(&mut slot)?;
        let answer = op(&mut prepared.child);
        if !prepared.child.is_alive() {
            self.replace_child(&mut slot, json!({"reason": "engine_error"}));
        }
        answer
    }

    /// Retire the child; a fresh one is ready for the next call (a failure here is
    /// not this call's: the next call tries again and reports it).
    fn replace_child(&self, slot: &mut MutexGuard<'_, Option<Prepared>>, why: serde_json::Value) {
        self.engine.audit("session_reset", &self.id, why);
        if let Some(old) = slot.take() {
            self.engine.retire(old);
        }
        let fresh = self.engine.take_child(&self.options, &self.tools).ok();
        *self.interrupter.lock().expect("interrupter") = fresh.as_ref().map(|p| p.child.interrupter());
        **slot = fresh;
    }
}

impl Engine {
    /// A session whose global environment starts from a [`Session::snapshot`] (loaded
    /// inside the new sandbox; the engine never reads it). R's warnings about what could
    /// not be restored come back with the session.
    pub fn restore_session(
        &self,
        options: EvalOptions,
        tools: Vec<Tool>,
        snapshot: &str,
    ) -> Result<(Session, Vec<String>), EngineError> {
        let session = Session::start(self.clone(), options, tools)?;
        let warnings = session.with_child(|child| files::restore(child, snapshot))?;
        Ok((session, warnings))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.engine.audit("session_close", &self.id, json!({}));
    }
}
