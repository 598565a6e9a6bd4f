//! What the HTTP API holds between requests: the engine, the sessions and who owns
//! them, what each token has in flight and has asked this minute, the jobs, and the
//! counters `/metrics` shows.

use super::errors::ApiError;
use super::jobs::Jobs;
use super::observe::Metrics;
use crate::auth::Tokens;
use crate::core::registry::{InUse, NewEntry};
use crate::core::{Owner, Registry, SessionCaps};
use rsandbox::{Engine, EvalOptions};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Server-side caps: what a request may ask for, and what one token may hold.
#[derive(Clone, Copy, Debug)]
pub struct HttpCaps {
    /// Longest timeout a request may ask for.
    pub max_timeout: Duration,
    /// Most memory a request may ask for.
    pub max_memory: u64,
    /// Most CPU seconds a request may ask for.
    pub max_cpu: u64,
    /// Requests one token may have in flight (jobs included).
    pub max_in_flight_per_token: usize,
    /// Sessions one token may hold.
    pub max_sessions_per_token: usize,
    /// Requests one token may make per minute (a fixed one-minute window).
    pub max_requests_per_minute_per_token: u32,
    /// How long a finished job's result is kept.
    pub job_retention: Duration,
}

impl Default for HttpCaps {
    fn default() -> Self {
        HttpCaps {
            max_timeout: Duration::from_secs(300),
            max_memory: 4 << 30,
            max_cpu: 600,
            max_in_flight_per_token: 16,
            max_sessions_per_token: 16,
            max_requests_per_minute_per_token: 1200,
            job_retention: Duration::from_secs(600),
        }
    }
}

impl HttpCaps {
    /// The options for a request: what it asked is refused above a cap (400, never
    /// lowered silently); what it left to the defaults is brought within the caps.
    pub fn bound(
        &self,
        mut options: EvalOptions,
        asked: &crate::request::Limits,
        asked_timeout: bool,
    ) -> Result<EvalOptions, ApiError> {
        if !asked_timeout {
            options.timeout = options.timeout.min(self.max_timeout);
        }
        if asked.memory.is_none() {
            options.memory = options.memory.map(|m| m.min(self.max_memory));
        }
        self.check(&options)?;
        Ok(options)
    }

    /// Refuse a timeout above the cap (400, never lowered silently).
    pub fn check_timeout(&self, timeout: Duration) -> Result<(), ApiError> {
        if timeout > self.max_timeout {
            return Err(ApiError::bad_input(format!(
                "timeout above this server's cap of {} s",
                self.max_timeout.as_secs()
            )));
        }
        Ok(())
    }

    /// Refuse options above the caps (400, never lowered silently).
    pub fn check(&self, options: &EvalOptions) -> Result<(), ApiError> {
        self.check_timeout(options.timeout)?;
        if options.memory.is_some_and(|m| m > self.max_memory) {
            return Err(ApiError::bad_input(format!(
                "memory above this server's cap of {} MiB",
                self.max_memory >> 20
            )));
        }
        if options.cpu_seconds.is_some_and(|c| c > self.max_cpu) {
            return Err(ApiError::bad_input(format!("cpu above this server's cap of {} s", self.max_cpu)));
        }
        Ok(())
    }
}

/// The API's state.
pub struct AppState {
    pub(super) engine: Engine,
    pub(super) tokens: Option<Tokens>,
    pub(super) caps: HttpCaps,
    pub(super) metrics: Arc<Metrics>,
    pub(super) jobs: Jobs,
    /// The sessions, each its token's.
    pub(super) sessions: Registry,
    in_flight: Mutex<HashMap<String, usize>>,
    /// Token → (start of its current minute, requests in it).
    minute: Mutex<HashMap<String, (Instant, u32)>>,
    /// Sandboxes running code now (evals, executes, jobs).
    pub(super) busy: AtomicUsize,
    /// The last readiness check and when it was made (`/readyz`); the async lock makes
    /// callers that arrive during a check wait for its answer instead of starting more.
    ready: tokio::sync::Mutex<Option<(Instant, Result<(), ApiError>)>>,
}

/// How long a readiness answer is reused: `/readyz` starts at most one test sandbox in
/// that time, however often it is asked.
pub const READY_TTL: Duration = Duration::from_secs(5);

/// A request counted against its token's in-flight cap (and the server's busy gauge)
/// until dropped.
pub struct InFlight {
    state: Arc<AppState>,
    token: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.state.busy.fetch_sub(1, Ordering::SeqCst);
        if let Some(n) = self.state.in_flight.lock().expect("in flight").get_mut(&self.token) {
            *n -= 1;
        }
    }
}

impl AppState {
    pub fn new(engine: Engine, tokens: Option<Tokens>, caps: HttpCaps) -> AppState {
        AppState {
            engine,
            tokens,
            caps,
            metrics: Arc::default(),
            jobs: Jobs::new(caps.job_retention),
            sessions: Registry::new(SessionCaps {
                max_sessions: None,
                max_sessions_per_token: Some(caps.max_sessions_per_token),
                max_sessions_per_connection: None,
                idle_timeout: None,
            }),
            in_flight: Mutex::default(),
            minute: Mutex::default(),
            busy: AtomicUsize::new(0),
            ready: tokio::sync::Mutex::new(None),
        }
    }

    /// Whether a sandbox with the required layers can be made: a test sandbox's answer,
    /// reused for [`READY_TTL`] (one check at a time; the others wait for it).
    pub async fn readiness(self: &Arc<Self>) -> Result<(), ApiError> {
        let mut last = self.ready.lock().await;
        if let Some((at, answer)) = last.as_ref() {
            if at.elapsed() < READY_TTL {
                return answer.clone();
            }
        }
        let state = self.clone();
        let answer =
            tokio::task::spawn_blocking(move || state.engine.verify_lockdown().map(|_| ()).map_err(ApiError::from))
                .await
                .unwrap_or_else(|e| Err(ApiError::internal(format!("the readiness check failed: {e}"))));
        *last = Some((Instant::now(), answer.clone()));
        answer
    }

    /// Count a request of `token` in this minute, or 429 with the seconds left in it.
    pub fn count_request(&self, token: &str) -> Result<(), ApiError> {
        let mut minute = self.minute.lock().expect("rate");
        let now = Instant::now();
        let (start, n) = minute.entry(token.to_string()).or_insert((now, 0));
        if now.duration_since(*start) >= Duration::from_secs(60) {
            (*start, *n) = (now, 0);
        }
        if *n >= self.caps.max_requests_per_minute_per_token {
            let left = Duration::from_secs(60).saturating_sub(now.duration_since(*start));
            return Err(ApiError::rate_limited(
                format!("this token made {n} requests this minute (its limit)"),
                left.as_secs().max(1),
            ));
        }
        *n += 1;
        Ok(())
    }

    /// Count a request of `token` in flight, or 429.
    pub fn admit(self: &Arc<Self>, token: &str) -> Result<InFlight, ApiError> {
        let mut in_flight = self.in_flight.lock().expect("in flight");
        let n = in_flight.entry(token.to_string()).or_default();
        if *n >= self.caps.max_in_flight_per_token {
            return Err(ApiError::rate_limited(format!("{} requests of this token are in flight (its limit)", *n), 1));
        }
        *n += 1;
        self.busy.fetch_add(1, Ordering::SeqCst);
        Ok(InFlight { state: self.clone(), token: token.to_string() })
    }

    /// Keep a new session for `owner`, or refuse (409) over the token's cap.
    pub fn add_session(&self, owner: &str, new: NewEntry) -> Result<String, ApiError> {
        let id = self.sessions.insert(&Owner::token(owner), new)?;
        tracing::info!(session = %id, "session opened");
        Ok(id)
    }

    /// Whether `owner` may open another session (checked before one is made; the
    /// check in [`Self::add_session`] is the one that holds).
    pub fn may_add_session(&self, owner: &str) -> Result<(), ApiError> {
        self.sessions.may_open(&Owner::token(owner))
    }

    /// The session `id` of `owner` (404 for another token's, as for none).
    pub fn session(&self, owner: &str, id: &str) -> Result<InUse, ApiError> {
        self.sessions.acquire(&Owner::token(owner), id)
    }

    /// Sessions open.
    pub fn live_sessions(&self) -> usize {
        self.sessions.len()
    }

    /// End every session (at shutdown).
    pub fn close_all(&self) {
        self.sessions.close_all();
    }
}
