//! `rsandbox serve --http`: the engine as a JSON HTTP API (axum), for operators who put
//! it behind a load balancer.
//!
//! * `POST /v1/eval` — one evaluation in a fresh sandbox; the result is the CLI's
//!   `--json` result.
//! * `POST /v1/sessions` (its id also in `x-rsandbox-session`), `GET /v1/sessions` (the
//!   caller's), `POST /v1/sessions/{id}/execute`, `POST /v1/sessions/{id}/interrupt`,
//!   `DELETE /v1/sessions/{id}`, `GET /v1/sessions/{id}/files`, `GET|PUT
//!   /v1/sessions/{id}/files/{path}` (raw bytes with `Accept: application/octet-stream`)
//!   — persistent sessions, owned by the token that made them (another token gets 404).
//!   Ids come from `crate::ids`.
//! * `GET /healthz`, `GET /readyz` (a sandbox can be made; the answer is reused for a
//!   few seconds), `GET /metrics` (Prometheus
//!   text), `GET /openapi.json` (generated from these types by utoipa).
//!
//! * `POST /v1/sessions/{id}/snapshot`, and `restore` when creating a session.
//! * `POST /v1/jobs`, `GET /v1/jobs/{job}` — evaluations that outlive their request.
//! * With `Accept: text/event-stream`, `eval` and `execute` stream output and tool calls
//!   (`stream.rs`); `POST /v1/sessions/{id}/tool_results/{call}` answers a tool call.
//!
//! Security by default: with `--token-file` every `/v1` request needs a bearer token
//! (`crate::auth`); without one only loopback is served. Per token: requests in flight,
//! requests per minute (429 with Retry-After) and open sessions (409) are capped; limits
//! above the server's caps are refused (400, never silently lowered); bodies over 16
//! MiB get 413; headers must arrive within the header timeout, which also ends idle
//! kept-alive connections (`crate::listen`, shared with the MCP server). Errors are `{"error": {"code", "message"}}`
//! (`errors.rs`), unknown routes and methods included; a 401 says `WWW-Authenticate:
//! Bearer`. Every response carries `x-request-id`, also in each log line of its
//! request (`observe.rs`).

mod carry_over;
mod errors;
mod jobs;
mod observe;
mod routes;
mod state;
mod stream;

pub use crate::listen::ConnectionLimits;
pub use errors::{ApiError, ErrorBody, ErrorDetail};
pub use routes::ApiDoc;
// The request bodies, for the fuzz target `http_bodies`.
pub use routes::{EvalBody, ExecuteBody, SessionBody};
pub use state::HttpCaps;
pub use stream::ToolReply;

use crate::auth::Tokens;
use std::net::SocketAddr;
use std::sync::Arc;

/// Serve the API at `addr` until SIGINT or SIGTERM; `ready` gets the bound address.
/// Refuses a non-loopback address without tokens, a token whose `network=` reaches past
/// the profile's `[network]`, and an environment whose sandboxes cannot get their layers
/// (a test sandbox is made first).
///
/// At the signal: no new connections; running requests get the grace period; then
/// every session is closed and the function returns. Work still running then is
/// abandoned: when the process exits, the zygote sees its channel close and kills
/// every sandbox.
#[allow(clippy::too_many_arguments)]
pub fn serve(
    engine: rsandbox::Engine,
    addr: SocketAddr,
    tokens: Option<Tokens>,
    caps: HttpCaps,
    connections: ConnectionLimits,
    snapshot_dir: Option<std::path::PathBuf>,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), String> {
    crate::auth::check_bind(addr, tokens.as_ref()).map_err(|e| e.to_string())?;
    let networks = crate::core::TokenNetworks::new(tokens.as_ref(), engine.config().profile.network.as_ref())
        .map_err(|e| e.to_string())?;
    let carry_over = snapshot_dir.map(carry_over::CarryOver::new).transpose()?;
    engine.verify_lockdown().map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    let served = runtime.block_on(async move {
        let state = Arc::new(state::AppState::new(engine, tokens, networks, caps, carry_over));
        let app = routes::router(state.clone());
        let listener =
            tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let bound = listener.local_addr().map_err(|e| e.to_string())?;
        let stop_signal = crate::shutdown::stop_signal();
        ready(bound);
        tracing::info!(address = %bound, "listening");
        let stop = {
            let state = state.clone();
            async move {
                stop_signal.await;
                // Before the listener closes: requests for this replica's sessions that
                // reach another one from now on wait for them to be saved.
                if let Some(carry) = &state.carry_over {
                    carry.begin_drain();
                }
            }
        };
        crate::listen::run(listener, app, connections, stop).await;
        if state.carry_over.is_some() {
            // Snapshots are exchanges with sandboxes: off the async threads.
            let saving = state.clone();
            let (saved, failed) =
                tokio::task::spawn_blocking(move || saving.carry_over.as_ref().map_or((0, 0), |c| c.save_all(&saving)))
                    .await
                    .unwrap_or((0, 0));
            tracing::info!(saved, failed, "sessions saved for the other replicas");
        }
        // Every session's sandbox ends with the state, and the engine's directories with
        // its last handle.
        state.close_all();
        state.engine.shutdown();
        Ok(())
    });
    // Blocking work past the grace period is not waited for.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    served
}
