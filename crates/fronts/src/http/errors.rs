//! Every error the HTTP API answers: `{"error": {"code", "message"}}` with the status
//! that says what kind of failure it is.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use rsandbox::EngineError;
use serde::Serialize;

/// The body of an error response.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// A stable code: `bad_input`, `unauthorized`, `not_found`, `method_not_allowed`, `busy`, `too_large`,
    /// `rate_limited`, `sandbox_setup_failed`, `engine_error`.
    pub code: String,
    /// In words.
    pub message: String,
}

/// An error response.
#[derive(Clone, Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    retry_after: Option<u64>,
}

impl ApiError {
    /// 400: the request is wrong; nothing ran.
    pub fn bad_input(message: impl Into<String>) -> ApiError {
        ApiError { status: StatusCode::BAD_REQUEST, code: "bad_input", message: message.into(), retry_after: None }
    }

    /// 401: no valid bearer token.
    pub fn unauthorized() -> ApiError {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            code: "unauthorized",
            message: "a valid bearer token is required".into(),
            retry_after: None,
        }
    }

    /// 404: no such session for this token (another token's sessions are not found either).
    pub fn not_found(what: impl Into<String>) -> ApiError {
        ApiError { status: StatusCode::NOT_FOUND, code: "not_found", message: what.into(), retry_after: None }
    }

    /// 405: the route exists, not with this method.
    pub fn method_not_allowed() -> ApiError {
        ApiError {
            status: StatusCode::METHOD_NOT_ALLOWED,
            code: "method_not_allowed",
            message: "this route does not take that method (see /openapi.json)".into(),
            retry_after: None,
        }
    }

    /// 429: this token has too much in flight or asked too often; retry after `seconds`.
    pub fn rate_limited(message: impl Into<String>, seconds: u64) -> ApiError {
        ApiError {
            status: StatusCode::TOO_MANY_REQUESTS,
            code: "rate_limited",
            message: message.into(),
            retry_after: Some(seconds),
        }
    }

    /// 500: the supervisor itself failed.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "engine_error",
            message: message.into(),
            retry_after: None,
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        let code = crate::request::error_code(&e);
        let status = match code {
            "bad_input" => StatusCode::BAD_REQUEST,
            "busy" => StatusCode::CONFLICT,
            "sandbox_setup_failed" => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError { status, code, message: e.to_string(), retry_after: None }
    }
}

impl ApiError {
    /// The body alone (for a stream's `error` event or a failed job).
    pub fn into_body(self) -> ErrorBody {
        ErrorBody { error: ErrorDetail { code: self.code.into(), message: self.message } }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, retry_after) = (self.status, self.retry_after);
        let body = self.into_body();
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// A JSON body that could not be read: 400 (or 413 when too large), in the API's shape.
pub fn rejection(rejection: axum::extract::rejection::JsonRejection) -> ApiError {
    let status = rejection.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError { status, code: "too_large", message: rejection.body_text(), retry_after: None };
    }
    ApiError::bad_input(rejection.body_text())
}
