//! What every front accepts from a client for an evaluation: the limits (each optional,
//! the engine's defaults otherwise), input files, and how an engine error is named. One
//! owner, so the stdio protocol and the HTTP API cannot drift apart.

use rsandbox::{EngineError, EvalOptions, InputError};
use serde::Deserialize;

/// Limits a client may set per eval or session (all optional): the engine's one
/// limits type, the same as a profile's `[limits]`.
pub use rsandbox::Limits;

/// A file for the workspace.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct InputFile {
    /// Relative to the workspace.
    #[schemars(with = "WorkspacePath")]
    pub path: String,
    /// The content, base64.
    pub data_base64: String,
}

/// A path in a sandbox's workspace, for the schema: what `wire::names::workspace_path`
/// lets through (the engine checks it before the sandbox is asked, and the sandbox
/// again).
pub struct WorkspacePath;

impl schemars::JsonSchema for WorkspacePath {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "WorkspacePath".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "minLength": 1,
            "description": "Relative to the workspace: no leading '/', no '..', '.' or empty parts, no NUL, \
                            no symlink on the way (refused with bad_input)."
        })
    }
}

/// The engine's options for `limits` and `timeout` (seconds; it takes precedence over
/// `limits.timeout`), checked.
pub fn options_from(limits: &Limits, timeout: Option<f64>) -> Result<EvalOptions, EngineError> {
    let mut options = limits.apply(EvalOptions::default())?;
    if let Some(t) = timeout {
        options.timeout = rsandbox::limits::timeout_secs(t)?;
    }
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
