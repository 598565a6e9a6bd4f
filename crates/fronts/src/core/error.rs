//! Every error a front answers, named once: an [`ErrorCode`] (the stable word a client
//! matches on) and a message. Each front maps the code, not the message: HTTP to a
//! status ([`ErrorCode::http_status`]), the R package to a condition class
//! ([`ErrorCode::r_classes`]), MCP to a tool error's text ([`ServiceError::mcp_text`]),
//! the CLI to an exit status ([`ErrorCode::exit_code`]).

use rsandbox::EngineError;
use serde::{Deserialize, Serialize};

/// A stable error code; its `snake_case` name is what every front sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// A stdio line that is not JSON (its id is null).
    ParseError,
    /// Missing or wrong fields.
    InvalidRequest,
    /// A stdio `op` that does not exist.
    UnknownOp,
    /// A stdio line over 16 MiB (its id is null).
    LineTooLong,
    /// The request is wrong (empty code, nonsense limits, a limit above the server's
    /// cap, a bad path); nothing ran.
    BadInput,
    /// No valid bearer token.
    Unauthorized,
    /// No such route or job (another token's are not found either).
    NotFound,
    /// No such session for this caller: closed, never made, or another owner's (they
    /// are told apart from nothing).
    UnknownSession,
    /// A session closed by the server for idleness (said to its owner only).
    SessionClosed,
    /// A session id of another node (replica): the replica that held it is gone (or the
    /// balancer sent the request astray), and its state with it.
    SessionLost,
    /// A tool result nobody waits for.
    UnknownCall,
    /// The route exists, not with this method.
    MethodNotAllowed,
    /// The session runs another execute, or the server has no room now; retry later.
    Busy,
    /// The body is over the server's limit.
    TooLarge,
    /// The caller has too much in flight or asked too often; retry after a while.
    RateLimited,
    /// The sandbox could not apply every layer: nothing ran (fail closed).
    SandboxSetupFailed,
    /// The supervisor itself failed.
    EngineError,
}

impl ErrorCode {
    /// Every code, for tests and the schema.
    pub const ALL: [ErrorCode; 17] = [
        ErrorCode::ParseError,
        ErrorCode::InvalidRequest,
        ErrorCode::UnknownOp,
        ErrorCode::LineTooLong,
        ErrorCode::BadInput,
        ErrorCode::Unauthorized,
        ErrorCode::NotFound,
        ErrorCode::UnknownSession,
        ErrorCode::SessionClosed,
        ErrorCode::SessionLost,
        ErrorCode::UnknownCall,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Busy,
        ErrorCode::TooLarge,
        ErrorCode::RateLimited,
        ErrorCode::SandboxSetupFailed,
        ErrorCode::EngineError,
    ];

    /// The code as every front sends it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ParseError => "parse_error",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::UnknownOp => "unknown_op",
            ErrorCode::LineTooLong => "line_too_long",
            ErrorCode::BadInput => "bad_input",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::NotFound => "not_found",
            ErrorCode::UnknownSession => "unknown_session",
            ErrorCode::SessionClosed => "session_closed",
            ErrorCode::SessionLost => "session_lost",
            ErrorCode::UnknownCall => "unknown_call",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::Busy => "busy",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::SandboxSetupFailed => "sandbox_setup_failed",
            ErrorCode::EngineError => "engine_error",
        }
    }

    /// The HTTP status of an error with this code.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::ParseError | ErrorCode::InvalidRequest | ErrorCode::BadInput => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::NotFound | ErrorCode::UnknownSession | ErrorCode::UnknownCall | ErrorCode::UnknownOp => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::Busy => 409,
            ErrorCode::SessionClosed | ErrorCode::SessionLost => 410,
            ErrorCode::TooLarge | ErrorCode::LineTooLong => 413,
            ErrorCode::RateLimited => 429,
            ErrorCode::EngineError => 500,
            ErrorCode::SandboxSetupFailed => 503,
        }
    }

    /// The R package's condition classes for an error with this code, most specific
    /// first (each condition also inherits `rsandbox_error`); `r/rsandbox/R/conditions.R`
    /// (`error_response`) maps the same way.
    pub fn r_classes(self) -> &'static [&'static str] {
        match self {
            ErrorCode::SandboxSetupFailed => &["rsandbox_setup_error"],
            ErrorCode::BadInput => &["rsandbox_input_error"],
            ErrorCode::Busy => &["rsandbox_busy", "rsandbox_server_error"],
            _ => &["rsandbox_server_error"],
        }
    }

    /// The CLI's exit status for an error with this code: 2 when the request was wrong
    /// (nothing ran), 11 when the sandbox or the server could not serve it.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorCode::ParseError
            | ErrorCode::InvalidRequest
            | ErrorCode::UnknownOp
            | ErrorCode::LineTooLong
            | ErrorCode::BadInput
            | ErrorCode::TooLarge
            | ErrorCode::NotFound
            | ErrorCode::UnknownSession
            | ErrorCode::SessionClosed
            | ErrorCode::SessionLost
            | ErrorCode::UnknownCall
            | ErrorCode::MethodNotAllowed
            | ErrorCode::Unauthorized => EXIT_BAD_INPUT,
            ErrorCode::Busy | ErrorCode::RateLimited | ErrorCode::SandboxSetupFailed | ErrorCode::EngineError => {
                EXIT_SETUP_FAILED
            }
        }
    }

    /// The code of an engine error.
    pub fn of(e: &EngineError) -> ErrorCode {
        match e {
            EngineError::Input(_) => ErrorCode::BadInput,
            EngineError::Busy(_) | EngineError::AcquireTimeout(_) | EngineError::Capacity(_) => ErrorCode::Busy,
            EngineError::Setup(_) | EngineError::LayerRefused { .. } => ErrorCode::SandboxSetupFailed,
            _ => ErrorCode::EngineError,
        }
    }

    /// The code of a `snake_case` name, as clients and tests read it back.
    pub fn parse(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The CLI's exit status for bad input: nothing was started.
pub const EXIT_BAD_INPUT: u8 = 2;
/// The CLI's exit status when the sandbox could not be set up, or the engine failed.
pub const EXIT_SETUP_FAILED: u8 = 11;

/// What went wrong, as every front's error body carries it (`{"code", "message"}`).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "http", derive(utoipa::ToSchema))]
#[schemars(deny_unknown_fields)]
pub struct ErrorDetail {
    /// A stable code (`docs/protocol.md`, "Errors").
    pub code: ErrorCode,
    /// In words.
    pub message: String,
}

impl From<ServiceError> for ErrorDetail {
    fn from(e: ServiceError) -> ErrorDetail {
        ErrorDetail { code: e.code, message: e.message }
    }
}

/// An error as every front answers it: its code, its message, and (for
/// `rate_limited`) when to retry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceError {
    /// What kind of error.
    pub code: ErrorCode,
    /// In words, for the user.
    pub message: String,
    /// Seconds to wait before retrying (HTTP's `Retry-After`).
    pub retry_after: Option<u64>,
}

impl ServiceError {
    /// An error with `code`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ServiceError {
        ServiceError { code, message: message.into(), retry_after: None }
    }

    /// The request is wrong; nothing ran.
    pub fn bad_input(message: impl Into<String>) -> ServiceError {
        ServiceError::new(ErrorCode::BadInput, message)
    }

    /// No valid bearer token.
    pub fn unauthorized() -> ServiceError {
        ServiceError::new(ErrorCode::Unauthorized, "a valid bearer token is required")
    }

    /// No such route or job.
    pub fn not_found(what: impl Into<String>) -> ServiceError {
        ServiceError::new(ErrorCode::NotFound, what)
    }

    /// The route exists, not with this method.
    pub fn method_not_allowed() -> ServiceError {
        ServiceError::new(ErrorCode::MethodNotAllowed, "this route does not take that method (see /openapi.json)")
    }

    /// Too much in flight or too many requests; retry after `seconds`.
    pub fn rate_limited(message: impl Into<String>, seconds: u64) -> ServiceError {
        ServiceError { retry_after: Some(seconds), ..ServiceError::new(ErrorCode::RateLimited, message) }
    }

    /// The supervisor itself failed.
    pub fn internal(message: impl Into<String>) -> ServiceError {
        ServiceError::new(ErrorCode::EngineError, message)
    }

    /// The text of an MCP tool error: the message, then the code in brackets (as the R
    /// package shows a server error), so an agent can tell kinds apart.
    pub fn mcp_text(&self) -> String {
        format!("{} [{}]", self.message, self.code)
    }
}

impl std::fmt::Display for ServiceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ServiceError {}

impl From<EngineError> for ServiceError {
    fn from(e: EngineError) -> ServiceError {
        ServiceError::new(ErrorCode::of(&e), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes are a wire format: their names, statuses and exit statuses are pinned.
    #[test]
    fn codes_keep_their_names_and_mappings() {
        let names: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        for (code, name) in ErrorCode::ALL.iter().zip(&names) {
            assert_eq!(serde_json::to_value(code).unwrap(), *name);
            assert_eq!(ErrorCode::parse(name), Some(*code));
        }
        assert_eq!(ErrorCode::BadInput.http_status(), 400);
        assert_eq!(ErrorCode::UnknownSession.http_status(), 404);
        assert_eq!(ErrorCode::Busy.http_status(), 409);
        assert_eq!(ErrorCode::RateLimited.http_status(), 429);
        assert_eq!(ErrorCode::SandboxSetupFailed.http_status(), 503);
        assert_eq!(ErrorCode::BadInput.exit_code(), 2);
        assert_eq!(ErrorCode::SandboxSetupFailed.exit_code(), 11);
        assert_eq!(ErrorCode::Busy.r_classes(), ["rsandbox_busy", "rsandbox_server_error"]);
        assert_eq!(ErrorCode::BadInput.r_classes(), ["rsandbox_input_error"]);
    }

    #[test]
    fn engine_errors_get_their_codes() {
        let busy = rsandbox::EngineError::Busy("s-1".into());
        assert_eq!(ServiceError::from(busy).code, ErrorCode::Busy);
        let input = rsandbox::EngineError::Input(rsandbox::InputError::Workspace("..".into()));
        let e = ServiceError::from(input);
        assert_eq!(e.code, ErrorCode::BadInput);
        assert_eq!(e.mcp_text(), ".. [bad_input]");
    }
}
