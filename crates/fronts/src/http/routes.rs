//! The routes, their request and response types (from which `/openapi.json` is
//! generated), and the token check.

use super::errors::{rejection, ApiError, ErrorBody};
use super::jobs::JobView;
use super::observe::{observe, Caller, Gauges};
use super::state::AppState;
use super::stream::{self, StreamEvent, ToolReply};
use crate::core::bridge::ToolBridge;
use crate::core::registry::NewEntry;
use crate::core::Owner;
use crate::request::{decode_files, options_from, InputFile, Limits};
use axum::extract::{DefaultBodyLimit, Extension, Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rsandbox::{EvalRequest, EvalResult, ExecuteOptions, ToolSpec, WorkspaceFile};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Instant;
use utoipa::OpenApi;

/// Largest request body: code, files (base64) and JSON punctuation (the same limit
/// as every HTTP listener's).
pub const MAX_BODY: usize = crate::listen::MAX_BODY;

/// The response header of `POST /v1/sessions` naming the session, for a balancer's
/// affinity.
pub const SESSION_HEADER: &str = "x-rsandbox-session";

type AppResult<T> = Result<T, ApiError>;

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
    /// Values bound in the sandbox before the code runs: name to a value in the typed
    /// encoding (`docs/protocol.md`, "Values"), e.g.
    /// `{"x": {"type": "integer", "value": [1, 2]}}`.
    #[serde(default)]
    #[schema(value_type = std::collections::HashMap<String, rsandbox::values::RValue>)]
    pub globals: serde_json::Map<String, serde_json::Value>,
    /// Also return the value in the typed encoding (`value_typed`).
    #[serde(default)]
    pub typed: bool,
}

/// `POST /v1/sessions`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionBody {
    /// Limits for the session's sandbox (each optional).
    #[serde(default)]
    pub limits: Limits,
    /// Host tools: R functions whose calls the client answers (over a streaming execute).
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// A snapshot (from `POST /v1/sessions/{id}/snapshot`) to start from.
    pub restore: Option<String>,
}

/// A session's handle.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SessionCreated {
    /// Use it in the session's URLs.
    pub session: String,
    /// What R said restoring the snapshot (objects it could not restore).
    pub warnings: Vec<String>,
}

/// A session's global environment, saved.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Snapshot {
    /// Opaque (base64); only ever read inside a sandbox, by `restore`.
    pub snapshot: String,
    /// Objects that could not be saved (connections, external pointers).
    pub not_saved: Vec<String>,
}

/// A tool result accepted.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ToolResultAccepted {
    /// The call answered.
    pub call: String,
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
    /// `false`: no auto-printing of visible values, and the last value is returned
    /// whether visible or not (as `eval()`); default `true`, as a console.
    pub echo: Option<bool>,
    /// Values bound in the sandbox before the code runs: name to a value in the typed
    /// encoding (`docs/protocol.md`, "Values"), e.g.
    /// `{"x": {"type": "integer", "value": [1, 2]}}`.
    #[serde(default)]
    #[schema(value_type = std::collections::HashMap<String, rsandbox::values::RValue>)]
    pub globals: serde_json::Map<String, serde_json::Value>,
    /// Also return the value in the typed encoding (`value_typed`).
    #[serde(default)]
    pub typed: bool,
}

/// The answer to an interrupt.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Interrupted {
    /// Whether something was running.
    pub interrupted: bool,
}

/// A file of a workspace, as a listing shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FileInfo {
    /// Relative to the workspace.
    pub path: String,
    /// Bytes.
    pub size: u64,
}

/// A session's files.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FileList {
    /// Every regular file of the workspace (at most 10 000).
    pub files: Vec<FileInfo>,
    /// More files exist than a listing carries.
    pub truncated: bool,
}

/// One of the caller's sessions.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SessionInfo {
    /// Its id.
    pub session: String,
    /// Whether an execute runs in it now.
    pub executing: bool,
}

/// The caller's sessions (never another token's).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SessionList {
    /// Its open sessions.
    pub sessions: Vec<SessionInfo>,
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
    paths(eval, create_session, list_sessions, execute, interrupt, delete_session, list_files, get_file, put_file, snapshot,
          tool_result, create_job, get_job, healthz, readyz, metrics),
    components(schemas(EvalBody, SessionBody, SessionCreated, SessionList, SessionInfo, ExecuteBody, Interrupted, FileWritten,
                       FileList, FileInfo, Snapshot, ToolReply, ToolResultAccepted, JobView, ErrorBody, EvalResult, WorkspaceFile)),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

pub(super) fn router(state: Arc<AppState>) -> Router {
    let api = Router::new()
        .route("/v1/eval", post(eval))
        .route("/v1/jobs", post(create_job))
        .route("/v1/jobs/{job}", get(get_job))
        .route("/v1/sessions", post(create_session).get(list_sessions))
        .route("/v1/sessions/{id}", axum::routing::delete(delete_session))
        .route("/v1/sessions/{id}/execute", post(execute))
        .route("/v1/sessions/{id}/interrupt", post(interrupt))
        .route("/v1/sessions/{id}/snapshot", post(snapshot))
        .route("/v1/sessions/{id}/tool_results/{call}", post(tool_result))
        .route("/v1/sessions/{id}/files", get(list_files))
        .route("/v1/sessions/{id}/files/{*path}", get(get_file).put(put_file))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn(affinity))
        .route_layer(middleware::from_fn_with_state(state.clone(), authorize));
    Router::new()
        .merge(api)
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(|| async { Json(crate::core::schema::openapi()) }))
        .fallback(|| async { ApiError::not_found("no such route (the API is described at /openapi.json)") })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(state.metrics.clone(), observe))
        .with_state(state)
}

/// The bearer token's name into the request (401 without a valid one), and the token's
/// requests this minute counted (429 past its limit).
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
    let mut response = match state.count_request(&caller) {
        Ok(()) => {
            request.extensions_mut().insert(Caller(caller.clone()));
            next.run(request).await
        }
        Err(e) => e.into_response(),
    };
    // For the log line, which is written outside this layer.
    response.extensions_mut().insert(Caller(caller));
    response
}

/// Every successful answer about a session names it in the `x-rsandbox-session` header,
/// as its creation did: a balancer that learns affinity from responses then follows a
/// session that another replica restored after its own replica stopped.
async fn affinity(request: Request, next: Next) -> Response {
    let session = request
        .uri()
        .path()
        .strip_prefix("/v1/sessions/")
        .and_then(|rest| rest.split('/').next())
        .filter(|id| rsandbox::ids::node_of(id).is_some())
        .and_then(|id| header::HeaderValue::from_str(id).ok());
    let mut response = next.run(request).await;
    if let Some(id) = session.filter(|_| response.status().is_success()) {
        response.headers_mut().entry(SESSION_HEADER).or_insert(id);
    }
    response
}

/// Run blocking engine work on this thread, which hands its other tasks to another
/// runtime thread meanwhile (`block_in_place`), in the request's span (so its log lines
/// carry the request id). Not `spawn_blocking`: that moved each request to a pool thread
/// and its answer back, two thread wake-ups on every request's path. A panic in the work
/// is this request's 500, as it was from a pool thread, not the connection's end.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> AppResult<T> + Send + 'static) -> AppResult<T> {
    tokio::task::block_in_place(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)))
        .map_err(|_| ApiError::internal("a worker failed: it panicked".to_string()))?
}

/// Run blocking engine work whose events and result go to a server-sent event stream.
/// The work runs inside the request's span, so its log lines carry the request id.
/// `on_gone` runs if the client drops the stream before the work ends (a session's
/// execute is interrupted then, instead of running to its deadline for nobody).
fn streamed(
    work: impl FnOnce(&Arc<stream::StreamSender>) -> AppResult<EvalResult> + Send + 'static,
    on_gone: Option<Box<dyn FnOnce() + Send>>,
) -> Response {
    let (tx, response) = stream::channel();
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    if let Some(on_gone) = on_gone {
        let watched = tx.clone();
        tokio::spawn(async move {
            tokio::select! {
                // The client left, or was cut off for taking nothing.
                () = watched.gone() => on_gone(),
                _ = finished => {}
            }
        });
    }
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        let _entered = span.enter();
        let last = match work(&tx) {
            Ok(result) => StreamEvent::Result(Box::new(result)),
            Err(e) => StreamEvent::Error(ErrorBody::from(e)),
        };
        let _ = done.send(());
        // The client may have gone; the work is done either way.
        tx.send(last);
    });
    response.into_response()
}

/// The checked options of an eval or job by `caller` (the token's name): within the
/// server's caps and the token's network allowlist.
fn eval_options(state: &AppState, caller: &str, body: &EvalBody) -> AppResult<rsandbox::EvalOptions> {
    rsandbox::options::validate_code(&body.code).map_err(|e| ApiError::bad_input(e.to_string()))?;
    let asked_timeout = body.timeout.is_some() || body.limits.timeout.is_some();
    let options = state.caps.bound(options_from(&body.limits, body.timeout)?, &body.limits, asked_timeout)?;
    state.networks.bound(caller, options)
}

/// An eval in a fresh sandbox, with its events sent to `on_event`.
fn run_eval<'a>(
    state: &AppState,
    body: &'a mut EvalBody,
    options: rsandbox::EvalOptions,
    on_event: Option<&'a mut dyn FnMut(rsandbox::Event<'_>)>,
) -> AppResult<EvalResult> {
    let mut request = EvalRequest::new(&body.code, options);
    request.files = decode_files(std::mem::take(&mut body.files))?;
    request.collect = std::mem::take(&mut body.collect);
    request.globals = std::mem::take(&mut body.globals);
    request.typed = body.typed;
    request.on_event = on_event;
    Ok(state.engine.eval_request(request)?)
}

/// A result as the 200 answer, its outcome kept for the request's log line.
fn answer_with(state: &AppState, result: EvalResult) -> Response {
    let outcome = state.metrics.result(&result);
    let mut response = Json(result).into_response();
    response.extensions_mut().insert(outcome);
    response
}

/// The 200 answer: a result, as JSON or as the last event of a stream.
const RESULT_CONTENT: &str =
    "The result (whatever the outcome), as JSON; with `Accept: text/event-stream`, a stream of \
    `output` and `tool_call` events ending with one `result` (or `error`) event";

/// Evaluate in a fresh sandbox.
#[utoipa::path(post, path = "/v1/eval", request_body = EvalBody,
    responses((status = 200, description = RESULT_CONTENT, content((EvalResult = "application/json"), (String = "text/event-stream"))),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 413, body = ErrorBody),
              (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn eval(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Json<EvalBody>, axum::extract::rejection::JsonRejection>,
) -> AppResult<Response> {
    let Json(body) = body.map_err(rejection)?;
    let options = eval_options(&state, &caller, &body)?;
    let admitted = state.admit(&caller)?;
    if stream::wants_stream(&headers) {
        return Ok(streamed(
            move |tx| {
                let (_admitted, mut body) = (admitted, body);
                let mut emit = |e: rsandbox::Event<'_>| {
                    tx.send(StreamEvent::from_engine(e));
                };
                let result = run_eval(&state, &mut body, options, Some(&mut emit))?;
                state.metrics.result_after_answer(&result);
                Ok(result)
            },
            None,
        ));
    }
    let state2 = state.clone();
    let result = blocking(move || {
        let (_admitted, mut body) = (admitted, body);
        run_eval(&state2, &mut body, options, None)
    })
    .await?;
    Ok(answer_with(&state, result))
}

/// Start an evaluation that runs after this request returns; poll `GET /v1/jobs/{job}`.
#[utoipa::path(post, path = "/v1/jobs", request_body = EvalBody,
    responses((status = 202, description = "Started", body = JobView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 413, body = ErrorBody), (status = 429, body = ErrorBody)))]
async fn create_job(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    body: Result<Json<EvalBody>, axum::extract::rejection::JsonRejection>,
) -> AppResult<(StatusCode, [(header::HeaderName, String); 1], Json<JobView>)> {
    let Json(body) = body.map_err(rejection)?;
    let options = eval_options(&state, &caller, &body)?;
    let admitted = state.admit(&caller)?;
    let job = state.jobs.start(&caller);
    let (state2, id) = (state.clone(), job.job.clone());
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        let _entered = span.enter();
        let (_admitted, mut body) = (admitted, body);
        let outcome = run_eval(&state2, &mut body, options, None)
            .inspect(|result| state2.metrics.result_after_answer(result))
            .map_err(ErrorBody::from);
        state2.jobs.finish(&id, outcome);
    });
    let location = format!("/v1/jobs/{}", job.job);
    Ok((StatusCode::ACCEPTED, [(header::LOCATION, location)], Json(job)))
}

/// A job: running, done (with its result) or failed (with its error). Finished jobs are
/// kept for the server's retention period.
#[utoipa::path(get, path = "/v1/jobs/{job}", params(("job" = String, Path, description = "The job")),
    responses((status = 200, body = JobView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn get_job(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    Path(job): Path<String>,
) -> AppResult<Json<JobView>> {
    Ok(Json(state.jobs.get(&caller, &job)?))
}

/// Start a session.
#[utoipa::path(post, path = "/v1/sessions", request_body = SessionBody,
    responses((status = 201, body = SessionCreated,
               headers(("x-rsandbox-session" = String, description = "The session's id, for a balancer's affinity"))),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 409, description = "this token holds its limit of sessions", body = ErrorBody),
              (status = 503, body = ErrorBody)))]
async fn create_session(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    body: Result<Json<SessionBody>, axum::extract::rejection::JsonRejection>,
) -> AppResult<(StatusCode, [(header::HeaderName, String); 1], Json<SessionCreated>)> {
    let Json(body) = body.map_err(rejection)?;
    let options = state.caps.bound(options_from(&body.limits, None)?, &body.limits, body.limits.timeout.is_some())?;
    let options = state.networks.bound(&caller, options)?;
    let bridge = ToolBridge::new(stream::NO_LISTENER);
    let tools = bridge.tools(body.tools).map_err(ApiError::bad_input)?;
    state.may_add_session(&caller)?;
    let admitted = state.admit(&caller)?;
    let state2 = state.clone();
    let created = blocking(move || {
        let _admitted = admitted;
        let (session, warnings) = match body.restore {
            None => (state2.engine.session(options.clone(), tools)?, Vec::new()),
            Some(snapshot) => state2.engine.restore_session(options.clone(), tools, &snapshot)?,
        };
        let session = state2.add_session(&caller, NewEntry { session, bridge, options, implicit: false })?;
        Ok(SessionCreated { session, warnings })
    })
    .await?;
    let affinity = [(header::HeaderName::from_static(SESSION_HEADER), created.session.clone())];
    Ok((StatusCode::CREATED, affinity, Json(created)))
}

/// The caller's open sessions (another token's are never listed).
#[utoipa::path(get, path = "/v1/sessions",
    responses((status = 200, body = SessionList), (status = 401, body = ErrorBody), (status = 429, body = ErrorBody)))]
async fn list_sessions(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
) -> Json<SessionList> {
    let sessions = state
        .sessions
        .sessions_of(&Owner::token(caller))
        .into_iter()
        .map(|entry| SessionInfo { session: entry.id.clone(), executing: entry.is_executing() })
        .collect();
    Json(SessionList { sessions })
}

/// Run code in a session.
#[utoipa::path(post, path = "/v1/sessions/{id}/execute", request_body = ExecuteBody,
    params(("id" = String, Path, description = "The session")),
    responses((status = 200, description = RESULT_CONTENT, content((EvalResult = "application/json"), (String = "text/event-stream"))),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, description = "busy with another execute", body = ErrorBody),
              (status = 429, body = ErrorBody)))]
async fn execute(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Result<Json<ExecuteBody>, axum::extract::rejection::JsonRejection>,
) -> AppResult<Response> {
    let Json(mut body) = body.map_err(rejection)?;
    rsandbox::options::validate_code(&body.code).map_err(|e| ApiError::bad_input(e.to_string()))?;
    let timeout = match body.timeout {
        None => ExecuteOptions::default().timeout.min(state.caps.max_timeout),
        Some(t) => rsandbox::limits::timeout_secs(t).map_err(rsandbox::EngineError::from)?,
    };
    state.caps.check_timeout(timeout)?;
    let entry = state.session(&caller, &id).await?;
    let executing = entry.start_execute()?;
    let admitted = state.admit(&caller)?;
    let options = ExecuteOptions {
        timeout,
        echo: body.echo.unwrap_or(true),
        globals: std::mem::take(&mut body.globals),
        typed: body.typed,
        ..ExecuteOptions::default()
    };
    if stream::wants_stream(&headers) {
        let deadline = Instant::now() + timeout;
        let gone = entry.clone();
        let on_gone: Box<dyn FnOnce() + Send> = Box::new(move || {
            tracing::info!("the client left the stream; interrupting the execute");
            gone.session().interrupt();
        });
        return Ok(streamed(
            move |tx| {
                let _running = (admitted, executing);
                let _attached = entry.bridge.attach(stream::tool_sink(tx.clone()), deadline);
                let mut emit = |e: rsandbox::Event<'_>| {
                    tx.send(StreamEvent::from_engine(e));
                };
                let result = entry.session().execute_streaming(&body.code, &options, Some(&mut emit))?;
                state.metrics.result_after_answer(&result);
                Ok(result)
            },
            Some(on_gone),
        ));
    }
    let result = blocking(move || {
        let _running = (admitted, executing);
        Ok(entry.session().execute(&body.code, &options)?)
    })
    .await?;
    Ok(answer_with(&state, result))
}

/// Answer a session's tool call (the `call` of a `tool_call` event): `value`, or `error`.
#[utoipa::path(post, path = "/v1/sessions/{id}/tool_results/{call}", request_body = ToolReply,
    params(("id" = String, Path, description = "The session"), ("call" = String, Path, description = "The call")),
    responses((status = 200, body = ToolResultAccepted), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, description = "no such session, or no call of that id waits", body = ErrorBody)))]
async fn tool_result(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    Path((id, call)): Path<(String, String)>,
    body: Result<Json<ToolReply>, axum::extract::rejection::JsonRejection>,
) -> AppResult<Json<ToolResultAccepted>> {
    let Json(reply) = body.map_err(rejection)?;
    let answer = match (reply.value, reply.error) {
        (value, None) => Ok(value.unwrap_or(serde_json::Value::Null)),
        (None, Some(error)) => Err(error),
        (Some(_), Some(_)) => return Err(ApiError::bad_input("give value or error, not both")),
    };
    let entry = state.session(&caller, &id).await?;
    if !entry.bridge.answer(&call, answer) {
        return Err(ApiError::new(
            crate::core::ErrorCode::UnknownCall,
            format!("no tool call {} waits", rsandbox::quote_excerpt(&call)),
        ));
    }
    Ok(Json(ToolResultAccepted { call }))
}

/// Save a session's global environment (to start another session from it).
#[utoipa::path(post, path = "/v1/sessions/{id}/snapshot", params(("id" = String, Path, description = "The session")),
    responses((status = 200, body = Snapshot), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 409, body = ErrorBody)))]
async fn snapshot(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    Path(id): Path<String>,
) -> AppResult<Json<Snapshot>> {
    let entry = state.session(&caller, &id).await?;
    let (snapshot, not_saved) = blocking(move || Ok(entry.session().snapshot()?)).await?;
    Ok(Json(Snapshot { snapshot, not_saved }))
}

/// Interrupt what runs in a session (as Ctrl-C; the session keeps its state).
#[utoipa::path(post, path = "/v1/sessions/{id}/interrupt", params(("id" = String, Path, description = "The session")),
    responses((status = 200, body = Interrupted), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn interrupt(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    Path(id): Path<String>,
) -> AppResult<Json<Interrupted>> {
    let entry = state.session(&caller, &id).await?;
    Ok(Json(Interrupted { interrupted: entry.session().interrupt() }))
}

/// End a session (its variables and files are gone).
#[utoipa::path(delete, path = "/v1/sessions/{id}", params(("id" = String, Path, description = "The session")),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn delete_session(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    Path(id): Path<String>,
) -> AppResult<StatusCode> {
    state.sessions.remove(&Owner::token(caller), &id)?;
    Ok(StatusCode::NO_CONTENT)
}

/// List the files of a session's workspace.
#[utoipa::path(get, path = "/v1/sessions/{id}/files", params(("id" = String, Path, description = "The session")),
    responses((status = 200, body = FileList), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 409, body = ErrorBody), (status = 429, body = ErrorBody)))]
async fn list_files(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    Path(id): Path<String>,
) -> AppResult<Json<FileList>> {
    let entry = state.session(&caller, &id).await?;
    let (files, truncated) = blocking(move || Ok(entry.session().list_files()?)).await?;
    let files = files.into_iter().map(|f| FileInfo { path: f.path, size: f.size }).collect();
    Ok(Json(FileList { files, truncated }))
}

/// Whether the client asked for raw bytes (`Accept: application/octet-stream`) rather
/// than JSON.
fn wants_raw(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.split(';').next().unwrap_or("").trim())
        .any(|t| t.eq_ignore_ascii_case("application/octet-stream"))
}

/// Read a file of a session's workspace: JSON with the content in base64, or with
/// `Accept: application/octet-stream` the raw bytes.
#[utoipa::path(get, path = "/v1/sessions/{id}/files/{path}",
    params(("id" = String, Path, description = "The session"), ("path" = String, Path, description = "Relative to the workspace")),
    responses((status = 200, description = "The file: JSON (base64 content), or its bytes with `Accept: application/octet-stream`",
               content((WorkspaceFile = "application/json"), (Vec<u8> = "application/octet-stream"))),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn get_file(
    State(state): State<Arc<AppState>>,
    Extension(Caller(caller)): Extension<Caller>,
    Path((id, path)): Path<(String, String)>,
    headers: HeaderMap,
) -> AppResult<Response> {
    let entry = state.session(&caller, &id).await?;
    let file = blocking(move || Ok(entry.session().get_file(&path)?)).await?;
    if wants_raw(&headers) {
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&file.data_base64)
            .map_err(|e| ApiError::internal(format!("the engine's file was not base64: {e}")))?;
        return Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response());
    }
    Ok(Json(file).into_response())
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
    let entry = state.session(&caller, &id).await?;
    let size = blocking({
        let path = path.clone();
        move || Ok(entry.session().put_file(&path, &body)?)
    })
    .await?;
    Ok(Json(FileWritten { path, size }))
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", security(()), responses((status = 200, description = "Up")))]
async fn healthz() -> &'static str {
    "ok\n"
}

/// A sandbox with the required layers can be made now (a test sandbox's answer, reused
/// for a few seconds: asking often starts no more sandboxes).
#[utoipa::path(get, path = "/readyz", security(()), responses((status = 200, description = "Ready"), (status = 503, body = ErrorBody)))]
async fn readyz(State(state): State<Arc<AppState>>) -> AppResult<&'static str> {
    state.readiness().await?;
    Ok("ready\n")
}

/// Prometheus text: requests by route and status, latency histograms, outcomes,
/// violations, sessions, busy sandboxes, the idle pool, running jobs, the queue.
#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Prometheus text format", content_type = "text/plain"),
    (status = 401, body = ErrorBody)))]
async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let warm = state.engine.warm_status();
    let gauges = Gauges {
        sessions: state.live_sessions(),
        busy: state.busy.load(std::sync::atomic::Ordering::SeqCst),
        pool_idle: warm.idle,
        jobs_running: state.jobs.running(),
        queue: warm.waiting,
    };
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render(&gauges))
}
