//! What the HTTP API holds between requests: the engine, the sessions and who owns
//! them, what each token has in flight, and the counters `/metrics` shows.

use super::errors::ApiError;
use crate::auth::Tokens;
use rsandbox::{Engine, EvalOptions, Session};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Server-side caps: what a request may ask for, and what one token may hold.
#[derive(Clone, Copy, Debug)]
pub struct HttpCaps {
    /// Longest timeout a request may ask for.
    pub max_timeout: Duration,
    /// Most memory a request may ask for.
    pub max_memory: u64,
    /// Most CPU seconds a request may ask for.
    pub max_cpu: u64,
    /// Requests one token may have in flight.
    pub max_in_flight_per_token: usize,
    /// Sessions one token may hold.
    pub max_sessions_per_token: usize,
}

impl Default for HttpCaps {
    fn default() -> Self {
        HttpCaps {
            max_timeout: Duration::from_secs(300),
            max_memory: 4 << 30,
            max_cpu: 600,
            max_in_flight_per_token: 16,
            max_sessions_per_token: 16,
        }
    }
}

impl HttpCaps {
    /// The options for a request: what it asked is refused above a cap (400, never
    /// lowered silently); what it left to the defaults is brought within the caps.
    pub fn bound(&self, mut options: EvalOptions, asked: &crate::request::Limits, asked_timeout: bool) -> Result<EvalOptions, ApiError> {
        if !asked_timeout {
            options.timeout = options.timeout.min(self.max_timeout);
        }
        if asked.memory.is_none() {
            options.memory = options.memory.map(|m| m.min(self.max_memory));
        }
        self.check(&options)?;
        Ok(options)
    }

    /// Refuse options above the caps (400, never lowered silently).
    pub fn check(&self, options: &EvalOptions) -> Result<(), ApiError> {
        if options.timeout > self.max_timeout {
            return Err(ApiError::bad_input(format!("timeout above this server's cap of {} s", self.max_timeout.as_secs())));
        }
        if options.memory.is_some_and(|m| m > self.max_memory) {
            return Err(ApiError::bad_input(format!("memory above this server's cap of {} MiB", self.max_memory >> 20)));
        }
        if options.cpu_seconds.is_some_and(|c| c > self.max_cpu) {
            return Err(ApiError::bad_input(format!("cpu above this server's cap of {} s", self.max_cpu)));
        }
        Ok(())
    }
}

/// A session and the token that made it.
struct Owned {
    session: Arc<Session>,
    owner: String,
}

/// The API's state.
pub struct AppState {
    pub(super) engine: Engine,
    pub(super) tokens: Option<Tokens>,
    pub(super) caps: HttpCaps,
    sessions: Mutex<HashMap<String, Owned>>,
    in_flight: Mutex<HashMap<String, usize>>,
    /// (route, status) → count; outcome → count.
    pub(super) requests: Mutex<BTreeMap<(String, u16), u64>>,
    pub(super) outcomes: Mutex<BTreeMap<String, u64>>,
}

/// A request counted against its token's in-flight cap until dropped.
pub struct InFlight {
    state: Arc<AppState>,
    token: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
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
            sessions: Mutex::default(),
            in_flight: Mutex::default(),
            requests: Mutex::default(),
            outcomes: Mutex::default(),
        }
    }

    /// Count a request of `token` in flight, or 429.
    pub fn admit(self: &Arc<Self>, token: &str) -> Result<InFlight, ApiError> {
        let mut in_flight = self.in_flight.lock().expect("in flight");
        let n = in_flight.entry(token.to_string()).or_default();
        if *n >= self.caps.max_in_flight_per_token {
            return Err(ApiError::rate_limited(format!("{} requests of this token are in flight (its limit)", *n)));
        }
        *n += 1;
        Ok(InFlight { state: self.clone(), token: token.to_string() })
    }

    /// Keep a new session for `owner`, or refuse (409) over the token's cap.
    pub fn add_session(&self, owner: &str, session: Session) -> Result<String, ApiError> {
        let mut sessions = self.sessions.lock().expect("sessions");
        let held = sessions.values().filter(|s| s.owner == owner).count();
        if held >= self.caps.max_sessions_per_token {
            return Err(ApiError::from(rsandbox::EngineError::Busy(format!(
                "this token holds {held} sessions (its limit); delete one first"
            ))));
        }
        let id = session.id().to_string();
        sessions.insert(id.clone(), Owned { session: Arc::new(session), owner: owner.to_string() });
        Ok(id)
    }

    /// The session `id` of `owner` (404 for another token's, as for none).
    pub fn session(&self, owner: &str, id: &str) -> Result<Arc<Session>, ApiError> {
        match self.sessions.lock().expect("sessions").get(id) {
            Some(s) if s.owner == owner => Ok(s.session.clone()),
            _ => Err(ApiError::not_found(format!("no session {id:?}"))),
        }
    }

    /// Remove `owner`'s session `id` (its sandbox ends when the last use does).
    pub fn remove_session(&self, owner: &str, id: &str) -> Result<(), ApiError> {
        let mut sessions = self.sessions.lock().expect("sessions");
        match sessions.get(id) {
            Some(s) if s.owner == owner => {
                sessions.remove(id);
                Ok(())
            }
            _ => Err(ApiError::not_found(format!("no session {id:?}"))),
        }
    }

    /// Sessions open.
    pub fn live_sessions(&self) -> usize {
        self.sessions.lock().expect("sessions").len()
    }

    /// End every session (at shutdown).
    pub fn close_all(&self) {
        let all: Vec<Owned> = self.sessions.lock().expect("sessions").drain().map(|(_, s)| s).collect();
        drop(all);
    }
}
