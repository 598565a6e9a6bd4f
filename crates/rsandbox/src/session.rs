//! Persistent sessions: one locked-down child that keeps R state between executes.
//!
//! After a timeout, a limit, a crash, `quit()` or an exceeded tool-call cap the child is
//! replaced by a fresh one (new process, new workspace) and the result says so
//! (`reset: true` with `reset_reason`); the next execute works. An execute while another
//! is running on the same session gets [`EngineError::Busy`].

use crate::errors::EngineError;
use crate::options::EvalOptions;
use crate::result::{EvalResult, Outcome};
use crate::tools::Tool;
use crate::{Engine, Prepared};
use serde_json::json;
use std::sync::{Mutex, TryLockError};
use std::time::Duration;

/// Per-execute settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecuteOptions {
    /// Wall-clock limit for this execute.
    pub timeout: Duration,
    /// Tool calls allowed in this execute.
    pub max_tool_calls: u32,
    /// stdout + stderr + result bytes allowed.
    pub max_output: u64,
}

impl Default for ExecuteOptions {
    fn default() -> Self {
        ExecuteOptions { timeout: Duration::from_secs(30), max_tool_calls: 100, max_output: EvalOptions::default().max_output }
    }
}

/// A persistent, isolated R session.
pub struct Session {
    engine: Engine,
    id: String,
    options: EvalOptions,
    tools: Vec<Tool>,
    current: Mutex<Option<Prepared>>,
}

impl Session {
    pub(crate) fn start(engine: Engine, options: EvalOptions, tools: Vec<Tool>) -> Result<Session, EngineError> {
        let prepared = engine.take_child(&options, &tools)?;
        let id = engine.new_id("session");
        engine.audit("session_start", &id, json!({"tools": tools.iter().map(|t| &t.spec.name).collect::<Vec<_>>()}));
        Ok(Session { engine, id, options, tools, current: Mutex::new(Some(prepared)) })
    }

    /// The session's id (audit log, protocol).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Run code in the session. State persists to the next call unless the result says
    /// `reset`.
    pub fn execute(&self, code: &str, options: &ExecuteOptions) -> Result<EvalResult, EngineError> {
        let mut slot = match self.current.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::WouldBlock) => return Err(EngineError::Busy(self.id.clone())),
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
        };
        if slot.is_none() {
            *slot = Some(self.engine.take_child(&self.options, &self.tools)?);
        }
        let prepared = slot.as_mut().expect("just filled");
        let per_call = EvalOptions { timeout: options.timeout, max_output: options.max_output, ..self.options.clone() };
        let run = self.engine.run(prepared, &self.id, code, &per_call, &self.tools, options.max_tool_calls);
        let mut result = match run {
            Ok(r) => r,
            Err(e @ EngineError::Input(_)) => return Err(e),
            Err(e) => {
                *slot = None;
                self.engine.audit("session_reset", &self.id, json!({"reason": "engine_error", "error": e.to_string()}));
                return Err(e);
            }
        };
        let reason = if result.tool_call_limit_exceeded {
            Some("tool_call_limit".to_string())
        } else if !prepared.child.is_alive() {
            Some(if matches!(result.outcome, Outcome::Ok | Outcome::Error) { "quit".into() } else { result.outcome.name() })
        } else {
            None
        };
        if let Some(reason) = reason {
            self.engine.audit("session_reset", &self.id, json!({"reason": reason}));
            // The old child and workspace go; a fresh one is ready for the next call.
            if let Some(old) = slot.take() {
                self.engine.retire(old);
            }
            // A failure here is not this result's: the next execute tries again and
            // reports it.
            *slot = self.engine.take_child(&self.options, &self.tools).ok();
            result.reset = true;
            result.reset_reason = Some(reason);
        }
        Ok(result)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.engine.audit("session_close", &self.id, json!({}));
    }
}
