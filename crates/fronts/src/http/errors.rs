//! Every error the HTTP API answers: `{"error": {"code", "message"}}` with the status
//! its code maps to ([`ErrorCode::http_status`]): the core's [`ServiceError`], as a
//! response.

pub use crate::core::error::ErrorDetail;
use crate::core::{ErrorCode, ServiceError};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An error response (the core's error; the status comes from its code).
pub type ApiError = ServiceError;

/// The body of an error response.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

impl From<ServiceError> for ErrorBody {
    fn from(e: ServiceError) -> ErrorBody {
        ErrorBody { error: ErrorDetail { code: e.code, message: e.message } }
    }
}

impl IntoResponse for ServiceError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry_after = self.retry_after;
        let mut response = (status, axum::Json(ErrorBody::from(self))).into_response();
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
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ServiceError::new(ErrorCode::TooLarge, rejection.body_text());
    }
    ApiError::bad_input(rejection.body_text())
}
