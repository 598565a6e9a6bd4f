//! rsandbox: run untrusted R code inside kernel-enforced isolation at fork speed.
//!
//! This crate is the supervisor side of the engine (it never links R): it starts an
//! embedded-R zygote (`rsandbox-zygote`), asks it to fork one locked-down child per
//! evaluation, enforces wall-clock and output limits, and reports what happened.
//!
//! ```no_run
//! let engine = rsandbox::Engine::start(rsandbox::EngineConfig::default())?;
//! let result = engine.eval("1 + 1", &rsandbox::EvalOptions::default())?;
//! assert_eq!(result.value, serde_json::json!(2));
//! # Ok::<(), rsandbox::EngineError>(())
//! ```
#![deny(missing_docs)]

pub mod channel;
pub mod errors;
pub mod evaluation;
pub mod exec;
pub mod options;
pub mod protocol;
pub mod r_policy;
pub mod result;
pub mod workspace;
pub mod zygote;

pub use errors::{EngineError, InputError};
pub use options::{parse_size, EngineConfig, EvalOptions};
pub use result::{EvalResult, Outcome};

use std::sync::{Arc, Mutex};
use workspace::WorkspaceRoot;
use zygote::{Zygote, ZygoteInfo};

/// A running engine: one zygote, ready to fork isolated R processes. Thread-safe:
/// evaluations from several threads run concurrently.
pub struct Engine {
    config: EngineConfig,
    zygote: Mutex<Arc<Zygote>>,
    workspaces: WorkspaceRoot,
}

impl Engine {
    /// Start the zygote (R start-up plus preloads) and wait until it is ready.
    pub fn start(config: EngineConfig) -> Result<Engine, EngineError> {
        if let Some(bad) = config.preload.iter().find(|p| !is_package_name(p)) {
            return Err(InputError::BadPackage(bad.clone()).into());
        }
        let binary = zygote::locate_zygote(config.zygote_path.as_deref())?;
        let zygote = Zygote::start(&binary, &config.preload)?;
        let workspaces = WorkspaceRoot::create(config.workspace_root.as_deref(), config.uid_base)?;
        Ok(Engine { config, zygote: Mutex::new(Arc::new(zygote)), workspaces })
    }

    /// What the zygote reported (R version, R home, library paths).
    pub fn info(&self) -> ZygoteInfo {
        self.zygote.lock().expect("zygote").info().clone()
    }

    /// The running zygote, restarted first if it has died.
    fn live_zygote(&self) -> Result<Arc<Zygote>, EngineError> {
        let mut current = self.zygote.lock().expect("zygote");
        if !current.is_alive() {
            let binary = zygote::locate_zygote(self.config.zygote_path.as_deref())?;
            *current = Arc::new(Zygote::start(&binary, &self.config.preload)?);
        }
        Ok(current.clone())
    }

    /// Evaluate `code` in a fresh, isolated R process (no state carried over).
    pub fn eval(&self, code: &str, options: &EvalOptions) -> Result<EvalResult, EngineError> {
        options::validate_code(code)?;
        options.validate()?;
        let zygote = self.live_zygote()?;
        let workspace = self.workspaces.workspace()?;
        let info = zygote.info();
        let spec = evaluation::EvalSpec {
            policy: r_policy::r_child_policy(info, &workspace, options, &self.config),
            workspace: workspace.path(),
            env: r_policy::r_child_environment(info, &workspace),
            code,
            timeout: options.timeout,
            max_output: options.max_output,
        };
        evaluation::evaluate(&zygote, spec)
    }
}

/// R package names: letters, digits and dots, starting with a letter.
pub fn is_package_name(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '.')
}
