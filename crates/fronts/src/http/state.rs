//! What the HTTP API holds between requests: the engine, the sessions and who owns
//! them, what each token has in flight and has asked this minute, the jobs, and the
//! counters `/metrics` shows.

use super::errors::ApiError;
use super::jobs::Jobs;
use super::observe::Metrics;
use crate::auth::Tokens;
use crate::core::registry::{InUse, NewEntry};
use crate::core::{Caps, Owner, Registry, TokenNetworks};
use rsandbox::Engine;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The HTTP server's ceilings: the core's [`Caps`] (its `Default` is this front's).
pub type HttpCaps = Caps;

/// The API's state.
pub struct AppState {
    pub(super) engine: Engine,
    pub(super) tokens: Option<Tokens>,
    /// The tokens' own network allowlists (`network=` in the token file), checked.
    pub(super) networks: TokenNetworks,
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
    /// Where sessions are saved at a graceful stop and restored from (`--snapshot-dir`).
    pub(super) carry_over: Option<super::carry_over::CarryOver>,
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
    pub fn new(
        engine: Engine,
        tokens: Option<Tokens>,
        networks: TokenNetworks,
        caps: HttpCaps,
        carry_over: Option<super::carry_over::CarryOver>,
    ) -> AppState {
        AppState {
            engine,
            tokens,
            networks,
            caps,
            metrics: Arc::default(),
            jobs: Jobs::new(&caps),
            sessions: Registry::new(caps.sessions),
            in_flight: Mutex::default(),
            minute: Mutex::default(),
            busy: AtomicUsize::new(0),
            ready: tokio::sync::Mutex::new(None),
            carry_over,
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

    /// The session `id` of `owner` (404 for another token's, as for none; 410 for
    /// another replica's that no replica saved). With `--snapshot-dir`, a session another
    /// replica saved when it stopped is restored here first.
    pub async fn session(self: &Arc<Self>, owner: &str, id: &str) -> Result<InUse, ApiError> {
        let owner_of = Owner::token(owner);
        let missing = match self.sessions.acquire(&owner_of, id) {
            Ok(entry) => return Ok(entry),
            Err(missing) => missing,
        };
        if self.carry_over.is_none() {
            return Err(missing);
        }
        let (state, owner, id2) = (self.clone(), owner.to_string(), id.to_string());
        let restored = tokio::task::spawn_blocking(move || {
            state.carry_over.as_ref().is_some_and(|carry| carry.restore(&state, &owner, &id2))
        })
        .await
        .unwrap_or(false);
        if restored {
            return self.sessions.acquire(&owner_of, id);
        }
        Err(missing)
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
