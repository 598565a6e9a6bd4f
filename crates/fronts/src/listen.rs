//! What every HTTP listener of rsandbox (`serve --http` and `mcp --http`) shares: the
//! accept loop and the body limit.
//!
//! The accept loop: HTTP/1.1 connections with a header timeout (which also bounds how
//! long a kept-alive connection may sit idle: hyper starts it again after each
//! response), and a graceful stop: stop accepting, let running requests finish within a
//! grace period, then return so the caller can end every sandbox.
//!
//! Why not `axum::serve`: it builds its connections without a timer, so hyper cannot
//! apply any header or idle timeout, and a client holding connections open without
//! sending anything would hold their tasks and descriptors forever.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::time::Duration;
use tokio::net::TcpListener;

/// Largest request body any listener reads: code, files (base64) and JSON punctuation.
pub const MAX_BODY: usize = 16 << 20;

/// How connections are served.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// A request's headers must arrive within this, counted from the connection's start
    /// or the previous response (so it is also the keep-alive idle timeout).
    pub header_timeout: Duration,
    /// After the stop signal, how long running requests may take before the server
    /// returns anyway.
    pub shutdown_grace: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits { header_timeout: Duration::from_secs(30), shutdown_grace: Duration::from_secs(30) }
    }
}

/// Serve `app` on `listener` until `stop` resolves; then finish within the grace period.
/// Returns whether every connection finished in time.
pub async fn run(listener: TcpListener, app: Router, limits: ConnectionLimits, stop: impl Future<Output = ()>) -> bool {
    let graceful = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _peer)) => stream,
                    Err(e) => {
                        // Out of descriptors and the like: wait instead of spinning; the
                        // connections already open keep being served.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(limits.header_timeout)
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
                let watched = graceful.watch(connection);
                tokio::spawn(async move {
                    // A client that goes away or times out ends only its connection.
                    if let Err(e) = watched.await {
                        tracing::debug!(error = %e, "connection ended");
                    }
                });
            }
            () = &mut stop => break,
        }
    }
    drop(listener);
    tracing::info!(
        grace_s = limits.shutdown_grace.as_secs(),
        "stopping: no new connections, finishing running requests"
    );
    tokio::select! {
        () = graceful.shutdown() => true,
        () = tokio::time::sleep(limits.shutdown_grace) => {
            tracing::warn!("requests still running after the grace period; ending their sandboxes");
            false
        }
    }
}

/// An error in the shape every HTTP front answers: `{"error": {"code", "message"}}`.
pub fn json_error(status: StatusCode, code: &str, message: &str) -> Response {
    (status, axum::Json(serde_json::json!({"error": {"code": code, "message": message}}))).into_response()
}

/// Middleware for a service that reads its body itself (rmcp's does, without a limit):
/// a body declared over [`MAX_BODY`] gets 413 before any of it is read; one without a
/// length (chunked) gets 413 as soon as more than that has arrived. Either way the rest
/// is not read (the connection then closes) and at most [`MAX_BODY`] is ever held.
pub async fn limit_body(request: Request, next: Next) -> Response {
    let too_large = || {
        json_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            &format!("the request body is over this server's limit of {} MiB", MAX_BODY >> 20),
        )
    };
    let declared =
        request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return too_large();
    }
    let (parts, body) = request.into_parts();
    match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(bytes) => next.run(Request::from_parts(parts, Body::from(bytes))).await,
        Err(e) if is_length_limit(&e) => too_large(),
        Err(e) => json_error(StatusCode::BAD_REQUEST, "bad_input", &format!("cannot read the request body: {e}")),
    }
}

fn is_length_limit(error: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = e.source();
    }
    false
}
