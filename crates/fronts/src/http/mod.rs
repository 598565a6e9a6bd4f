//! `rsandbox serve --http`: the engine as a JSON HTTP API (axum), for operators who put
//! it behind a load balancer.
//!
//! * `POST /v1/eval` — one evaluation in a fresh sandbox; the result is the CLI's
//!   `--json` result.
//! * `POST /v1/sessions`, `POST /v1/sessions/{id}/execute`, `POST
//!   /v1/sessions/{id}/interrupt`, `DELETE /v1/sessions/{id}`, `GET|PUT
//!   /v1/sessions/{id}/files/{path}` — persistent sessions, owned by the token that
//!   made them (another token gets 404).
//! * `GET /healthz`, `GET /readyz` (a sandbox can be made), `GET /metrics` (Prometheus
//!   text), `GET /openapi.json` (generated from these types by utoipa).
//!
//! Security by default: with `--token-file` every `/v1` request needs a bearer token
//! (`crate::auth`); without one only loopback is served. Per token: requests in flight
//! and open sessions are capped (429 with Retry-After, 409 for sessions), limits above
//! the server's caps are refused (400, never silently lowered), bodies over 16 MiB get
//! 413. Errors are `{"error": {"code", "message"}}` (`errors.rs`).
//!
//! Not built yet: streaming (SSE) and tool calls over HTTP, async jobs, snapshots.

mod errors;
mod routes;
mod state;

pub use errors::{ApiError, ErrorBody, ErrorDetail};
pub use routes::ApiDoc;
pub use state::HttpCaps;

use crate::auth::Tokens;
use std::net::SocketAddr;
use std::sync::Arc;

/// Serve the API at `addr` until SIGINT or SIGTERM; `ready` gets the bound address.
/// Refuses a non-loopback address without tokens, and an environment whose sandboxes
/// cannot get their layers (a test sandbox is made first).
pub fn serve(
    engine: rsandbox::Engine,
    addr: SocketAddr,
    tokens: Option<Tokens>,
    caps: HttpCaps,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), String> {
    crate::auth::check_bind(addr, tokens.as_ref()).map_err(|e| e.to_string())?;
    engine.verify_lockdown().map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let state = Arc::new(state::AppState::new(engine, tokens, caps));
        let app = routes::router(state.clone());
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        ready(listener.local_addr().map_err(|e| e.to_string())?);
        let served = axum::serve(listener, app).with_graceful_shutdown(crate::shutdown::stop_signal()).await;
        // Every session's sandbox ends with the state.
        state.close_all();
        served.map_err(|e| e.to_string())
    })
}
