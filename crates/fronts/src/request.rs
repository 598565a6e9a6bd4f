//! What every front accepts from a client for an evaluation: the limits (each optional,
//! the engine's defaults otherwise), input files, and how an engine error is named. One
//! owner, so the stdio protocol and the HTTP API cannot drift apart.

use rsandbox::{EngineError, EvalOptions, InputError};
use serde::Deserialize;
use std::time::Duration;

/// Limits a client may set per eval or session (all optional).
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// CPU seconds.
    #[cfg_attr(feature = "http", schema(minimum = 1))]
    pub cpu: Option<u64>,
    /// Memory the code may allocate, e.g. "512M".
    pub memory: Option<String>,
    /// Largest file, e.g. "16M".
    pub fsize: Option<String>,
    /// Disk quota of the workspace, e.g. "64M".
    pub disk: Option<String>,
    /// Processes at once.
    #[cfg_attr(feature = "http", schema(minimum = 1))]
    pub nproc: Option<u64>,
    /// Open files.
    #[cfg_attr(feature = "http", schema(minimum = 1))]
    pub nofile: Option<u64>,
    /// Largest stdout + stderr + result, e.g. "1M".
    pub max_output: Option<String>,
}

/// A file for the workspace.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct InputFile {
    /// Relative to the workspace.
    pub path: String,
    /// The content, base64.
    pub data_base64: String,
}

/// The engine's options for `limits` and `timeout` (seconds), checked.
pub fn options_from(limits: &Limits, timeout: Option<f64>) -> Result<EvalOptions, EngineError> {
    let d = EvalOptions::default();
    let size = |v: &Option<String>, default: Option<u64>| {
        v.as_deref().map(rsandbox::parse_size).transpose().map(|s| s.or(default))
    };
    let timeout = match timeout {
        None => d.timeout,
        Some(t) if t.is_finite() && t > 0.0 && t <= 86_400.0 => Duration::from_secs_f64(t),
        Some(t) => return Err(InputError::BadLimit { what: "timeout".into(), value: t.to_string() }.into()),
    };
    let options = EvalOptions {
        timeout,
        cpu_seconds: limits.cpu,
        memory: size(&limits.memory, d.memory)?,
        file_size: size(&limits.fsize, d.file_size)?,
        disk: size(&limits.disk, d.disk)?,
        processes: limits.nproc.or(d.processes),
        open_files: limits.nofile.or(d.open_files),
        max_output: size(&limits.max_output, Some(d.max_output))?.unwrap_or(d.max_output),
    };
    options.validate()?;
    Ok(options)
}

/// Base64 to bytes, or a bad-input error.
pub fn decode_base64(data: &str) -> Result<Vec<u8>, EngineError> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| InputError::Workspace(format!("data_base64 is not base64: {e}")).into())
}

/// The files, decoded.
pub fn decode_files(files: Vec<InputFile>) -> Result<Vec<(String, Vec<u8>)>, EngineError> {
    files.into_iter().map(|f| Ok((f.path, decode_base64(&f.data_base64)?))).collect()
}

/// The error code a client sees for an engine error.
pub fn error_code(e: &EngineError) -> crate::core::ErrorCode {
    crate::core::ErrorCode::of(e)
}
