//! The routes, their request and response types (from which `/openapi.json` is
//! generated), the token check and the request counters.

use super::errors::{rejection, ApiError, ErrorBody};
use super::state::AppState;
use crate::request::{decode_files, options_from, InputFile, Limits};
use axum::extract::{DefaultBodyLimit, Extension, MatchedPath, Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rsandbox::{EvalRequest, EvalResult, ExecuteOptions, WorkspaceFile};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use utoipa::OpenApi;

/// Largest request body: code, files (base64) and JSON punctuation.
pub const MAX_BODY: usize = 16 << 20;

type AppResult<T> = Result<T, ApiError>;

/// Who is asking: the token's name (`local` when the server has no tokens).
#[derive(Clone, Debug)]
pub struct Caller(pub String);

/// `POST /v1/eval`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalBody {
    /// R code.
    #[schema(pattern = r"\S")]
    pub code: String,
    /// Seconds (default 30; at most the server's cap).
    #[schema(exclusive_minimum = 0.0, maximum = 86400.0)]
    pub timeout: Option<f64>,
    /// Limits (each optional).
    #[serde(default)]
    pub limits: Limits,
    /// Files placed in the workspace before the code runs.
    #[serde(default)]
    pub files: Vec<InputFile>,
    /// Globs of workspace files to return in the result.
    #[serde(default)]
    pub collect: Vec<String>,
}

/// `POST /v1/sessions`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionBody {
    /// Limits for the session's sandbox (each optional).
    #[serde(default)]
    pub limits: Limits,
}

/// A session's handle.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SessionCreated {
    /// Use it in the session's URLs.
    pub session: String,
}

/// `POST /v1/sessions/{id}/execute`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteBody {
    /// R code, run in the session (its variables persist).
    #[schema(pattern = r"\S")]
    pub code: String,
    /// Seconds (default 30; at most the server's cap).
    #[schema(exclusive_minimum = 0.0, maximum = 86400.0)]
    pub timeout: Option<f64>,
}

/// The answer to an interrupt.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Interrupted {
    /// Whether something was running.
    pub interrupted: bool,
}

/// A file written.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FileWritten {
    /// Its path in the workspace.
    pub path: String,
    /// Bytes written.
    pub size: u64,
}

/// The API, as generated from the handlers and types.
#[derive(OpenApi)]
#[openapi(
    info(title = "rsandbox", description = "Run untrusted R code in kernel-enforced sandboxes."),
    paths(eval, create_session, execute, interrupt, delete_session, get_file, put_file, healthz, readyz),
    components(schemas(EvalBody, SessionBody, SessionCreated, ExecuteBody, Interrupted, FileWritten, ErrorBody, EvalResult, WorkspaceFile)),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("bearer", SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()));
    }
}

pub(super) fn router(state: Arc<AppState>) -> Router {
    let api = Router::new()
        .route("/v1/eval", post(eval))
        .route("/v1/sessions", post(create_session))
        .route("/v1/sessions/{id}", axum::routing::delete(delete_session))
        .route("/v1/sessions/{id}/execute", post(execute))
        .route("/v1/sessions/{id}/interrupt", post(interrupt))
        .route("/v1/sessions/{id}/files/{*path}", get(get_file).put(put_file))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(state.clone(), authorize));
    Router::new()
        .merge(api)
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(|| async { Json(ApiDoc::openapi()) }))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(state.clone(), count))
        .with_state(state)
}

/// The bearer token's name into the request (401 without a valid one).
async fn authorize(State(state): State<Arc<AppState>>, mut request: Request, next: Next) -> Response {
    let caller = match &state.tokens {
        None => "local".to_string(),
        Some(tokens) => {
            let header = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
            match header.and_then(|h| tokens.check_bearer(h)) {
                Some(name) => name.to_string(),
                None => return ApiError::unauthorized().into_response(),
            }
        }
    };
    request.extensions_mut().insert(Caller(caller));
    next.run(request).await
}

/// Count every answer by route and status.
async fn count(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let response = next.run(request).await;
    *state.requests.lock().expect("metrics").entry((route, response.status().as_u16())).or_default() += 1;
    response
}

/// Run blocking engine work off the async threads.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> AppResult<T> + Send + 'static) -> AppResult<T> {
    tokio::task::spawn_blocking(work).await.map_err(|e| ApiError::internal(format!("a worker failed: {e}")))?
}

fn counted(state: &AppState, result: &EvalResult) {
    *state.outcomes.lock().expect("metrics").entry(result.outcome.name().to_string()).or_default() += 1;
}

/// Evaluate in a fresh sandbox.
#[utoipa::path(post, path = "/v1/eval", request_body = EvalBody,
    responses((status = 200, description = "The result (whatever the outcome)", body = EvalResult),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody),
              (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn eval(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    body: Result<Json<EvalBody>, axum::extract::rejection::JsonRejection>,
) -> AppResult<Json<EvalResult>> {
    let Json(body) = body.map_err(rejection)?;
    let options = state.caps.bound(options_from(&body.limits, body.timeout)?, &body.limits, body.timeout.is_some())?;
    let admitted = state.admit(&caller)?;
    let state2 = state.clone();
    let result = blocking(move || {
        let _admitted = admitted;
        let mut request = EvalRequest::new(&body.code, options);
        request.files = decode_files(body.files)?;
        request.collect = body.collect;
        Ok(state2.engine.eval_request(request)?)
    })
    .await?;
    counted(&state, &result);
    Ok(Json(result))
}

/// Start a session.
#[utoipa::path(post, path = "/v1/sessions", request_body = SessionBody,
    responses((status = 201, body = SessionCreated), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 409, description = "this token holds its limit of sessions", body = ErrorBody),
              (status = 503, body = ErrorBody)))]
async fn create_session(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    body: Result<Json<SessionBody>, axum::extract::rejection::JsonRejection>,
) -> AppResult<(StatusCode, Json<SessionCreated>)> {
    let Json(body) = body.map_err(rejection)?;
    let options = state.caps.bound(options_from(&body.limits, None)?, &body.limits, false)?;
    let admitted = state.admit(&caller)?;
    let state2 = state.clone();
    let session = blocking(move || {
        let _admitted = admitted;
        let session = state2.engine.session(options, Vec::new())?;
        state2.add_session(&caller, session)
    })
    .await?;
    Ok((StatusCode::CREATED, Json(SessionCreated { session })))
}

/// Run code in a session.
#[utoipa::path(post, path = "/v1/sessions/{id}/execute", request_body = ExecuteBody,
    params(("id" = String, Path, description = "The session")),
    responses((status = 200, body = EvalResult), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, description = "busy with another execute", body = ErrorBody),
              (status = 429, body = ErrorBody)))]
async fn execute(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    Path(id): Path<String>,
    body: Result<Json<ExecuteBody>, axum::extract::rejection::JsonRejection>,
) -> AppResult<Json<EvalResult>> {
    let Json(body) = body.map_err(rejection)?;
    let timeout = match body.timeout {
        None => Duration::from_secs(30),
        Some(t) if t.is_finite() && t > 0.0 => Duration::from_secs_f64(t.min(86_400.0)),
        Some(t) => return Err(ApiError::bad_input(format!("invalid timeout: {t}"))),
    };
    if timeout > state.caps.max_timeout {
        return Err(ApiError::bad_input(format!("timeout above this server's cap of {} s", state.caps.max_timeout.as_secs())));
    }
    let session = state.session(&caller, &id)?;
    let admitted = state.admit(&caller)?;
    let result = blocking(move || {
        let _admitted = admitted;
        Ok(session.execute(&body.code, &ExecuteOptions { timeout, ..ExecuteOptions::default() })?)
    })
    .await?;
    counted(&state, &result);
    Ok(Json(result))
}

/// Interrupt what runs in a session (as Ctrl-C; the session keeps its state).
#[utoipa::path(post, path = "/v1/sessions/{id}/interrupt", params(("id" = String, Path, description = "The session")),
    responses((status = 200, body = Interrupted), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn interrupt(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    Path(id): Path<String>,
) -> AppResult<Json<Interrupted>> {
    let session = state.session(&caller, &id)?;
    Ok(Json(Interrupted { interrupted: session.interrupt() }))
}

/// End a session (its variables and files are gone).
#[utoipa::path(delete, path = "/v1/sessions/{id}", params(("id" = String, Path, description = "The session")),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn delete_session(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    Path(id): Path<String>,
) -> AppResult<StatusCode> {
    state.remove_session(&caller, &id)?;
    Ok(StatusCode::NO_CONTENT)
}

/// Read a file of a session's workspace.
#[utoipa::path(get, path = "/v1/sessions/{id}/files/{path}",
    params(("id" = String, Path, description = "The session"), ("path" = String, Path, description = "Relative to the workspace")),
    responses((status = 200, body = WorkspaceFile), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
async fn get_file(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    Path((id, path)): Path<(String, String)>,
) -> AppResult<Json<WorkspaceFile>> {
    let session = state.session(&caller, &id)?;
    Ok(Json(blocking(move || Ok(session.get_file(&path)?)).await?))
}

/// Write a file into a session's workspace (the body is the content).
#[utoipa::path(put, path = "/v1/sessions/{id}/files/{path}", request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    params(("id" = String, Path, description = "The session"), ("path" = String, Path, description = "Relative to the workspace")),
    responses((status = 200, body = FileWritten), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 413, body = ErrorBody)))]
async fn put_file(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    Path((id, path)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> AppResult<Json<FileWritten>> {
    let session = state.session(&caller, &id)?;
    let size = blocking({
        let path = path.clone();
        move || Ok(session.put_file(&path, &body)?)
    })
    .await?;
    Ok(Json(FileWritten { path, size }))
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", security(()), responses((status = 200, description = "Up")))]
async fn healthz() -> &'static str {
    "ok\n"
}

/// A sandbox with the required layers can be made now.
#[utoipa::path(get, path = "/readyz", security(()), responses((status = 200, description = "Ready"), (status = 503, body = ErrorBody)))]
async fn readyz(State(state): State<Arc<AppState>>) -> AppResult<&'static str> {
    blocking(move || state.engine.verify_lockdown().map(|_| ()).map_err(ApiError::from)).await?;
    Ok("ready\n")
}

/// Prometheus text: requests by route and status, outcomes, live sessions.
async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let mut text = String::from("# TYPE rsandbox_http_requests_total counter\n");
    for ((route, status), n) in state.requests.lock().expect("metrics").iter() {
        text.push_str(&format!("rsandbox_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}\n"));
    }
    text.push_str("# TYPE rsandbox_outcomes_total counter\n");
    for (outcome, n) in state.outcomes.lock().expect("metrics").iter() {
        text.push_str(&format!("rsandbox_outcomes_total{{outcome=\"{outcome}\"}} {n}\n"));
    }
    text.push_str(&format!("# TYPE rsandbox_sessions gauge\nrsandbox_sessions {}\n", state.live_sessions()));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}
