//! The sessions of a server, for every front (stdio, MCP, HTTP): who owns each one, the
//! caps on how many may be open, the idle timeout, and whether an execute runs in one.
//!
//! Ownership: a session belongs to the token that made it (`local` where no token file
//! names one) and, for a connection's implicit session (MCP), to that connection alone.
//! Another owner's session is reported exactly as one that never existed
//! ([`ErrorCode::UnknownSession`]). A session closed for idleness is said so to its own
//! token ([`ErrorCode::SessionClosed`]).
//!
//! Busy: one execute at a time per session; a second is refused with
//! [`ErrorCode::Busy`] before anything starts (an HTTP stream is refused before its
//! first event), in the same words on every front.

use super::bridge::ToolBridge;
use super::error::{ErrorCode, ServiceError};
use rsandbox::{EvalOptions, Session};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The owner of every session where no token file names one (stdio, loopback HTTP).
pub const LOCAL: &str = "local";
/// Handles of idle-closed sessions remembered, to say why a handle is gone.
const REMEMBERED_CLOSED: usize = 256;

/// Who makes a call: the name of the token it bears (`local` without tokens) and its
/// connection (0 where a front has none: HTTP requests, the stdio protocol's one pipe).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The token's name.
    pub token: String,
    /// The connection.
    pub connection: u64,
}

impl Owner {
    /// A token's owner, on no particular connection.
    pub fn token(token: impl Into<String>) -> Owner {
        Owner { token: token.into(), connection: 0 }
    }

    /// The one owner of a server without tokens.
    pub fn local() -> Owner {
        Owner::token(LOCAL)
    }
}

/// How many sessions may be open, and for how long unused. `None`: no such cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionCaps {
    /// Sessions open at once on the server.
    pub max_sessions: Option<usize>,
    /// Sessions one token may hold.
    pub max_sessions_per_token: Option<usize>,
    /// Sessions one connection may hold (its implicit one included).
    pub max_sessions_per_connection: Option<usize>,
    /// A session unused this long is closed (by [`Registry::close_idle`]).
    pub idle_timeout: Option<Duration>,
}

/// One open session.
pub struct Entry {
    /// The id clients use (`rsandbox::ids`).
    pub id: String,
    session: Mutex<Arc<Session>>,
    /// Where its tool calls cross to the client.
    pub bridge: Arc<ToolBridge>,
    /// The options it was made with (for a reset).
    pub options: EvalOptions,
    owner: Owner,
    /// A connection's own session (MCP's): only that connection may use it.
    implicit: bool,
    last_used: Mutex<Instant>,
    /// Calls using it now: it is not closed for idleness meanwhile.
    in_use: AtomicUsize,
    executing: AtomicBool,
}

impl Entry {
    /// Whether `owner` may use it; anyone else is told it does not exist.
    fn belongs_to(&self, owner: &Owner) -> bool {
        self.owner.token == owner.token && (!self.implicit || self.owner.connection == owner.connection)
    }

    /// The session (the one a reset put in place, after one).
    pub fn session(&self) -> Arc<Session> {
        self.session.lock().expect("session").clone()
    }

    /// Put a fresh session in place (a reset: same id, same limits); the old one ends
    /// when its last use does.
    pub fn replace_session(&self, fresh: Session) -> Arc<Session> {
        std::mem::replace(&mut *self.session.lock().expect("session"), Arc::new(fresh))
    }

    /// The name of the token that owns it.
    pub fn owner_token(&self) -> &str {
        &self.owner.token
    }

    /// Whether an execute runs in it now.
    pub fn is_executing(&self) -> bool {
        self.executing.load(Ordering::SeqCst)
    }

    fn touch(&self) {
        *self.last_used.lock().expect("last used") = Instant::now();
    }
}

/// A session while a call uses it: not closed for idleness meanwhile.
pub struct InUse(Arc<Entry>);

impl InUse {
    /// Mark an execute as running until the guard drops, or refuse with `busy` when one
    /// already runs.
    pub fn start_execute(&self) -> Result<Executing, ServiceError> {
        if self.0.executing.swap(true, Ordering::SeqCst) {
            return Err(rsandbox::EngineError::Busy(self.0.id.clone()).into());
        }
        Ok(Executing(self.0.clone()))
    }
}

impl Clone for InUse {
    fn clone(&self) -> InUse {
        self.0.in_use.fetch_add(1, Ordering::SeqCst);
        InUse(self.0.clone())
    }
}

impl std::ops::Deref for InUse {
    type Target = Entry;
    fn deref(&self) -> &Entry {
        &self.0
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_use.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An execute running in a session, until dropped.
pub struct Executing(Arc<Entry>);

impl Drop for Executing {
    fn drop(&mut self) {
        self.0.executing.store(false, Ordering::SeqCst);
    }
}

/// What [`Registry::insert`] needs besides the session.
pub struct NewEntry {
    /// The engine's session.
    pub session: Session,
    /// Its tool bridge (an unused one where the session has no tools).
    pub bridge: Arc<ToolBridge>,
    /// The options it was made with.
    pub options: EvalOptions,
    /// A connection's own session.
    pub implicit: bool,
}

/// Every session of a server, by id.
pub struct Registry {
    caps: SessionCaps,
    open: Mutex<HashMap<String, Arc<Entry>>>,
    /// Ids closed for idleness, newest last, with their token and how long they had
    /// been idle.
    idle_closed: Mutex<VecDeque<(String, String, Duration)>>,
}

impl Registry {
    /// An empty registry with these caps.
    pub fn new(caps: SessionCaps) -> Registry {
        Registry { caps, open: Mutex::default(), idle_closed: Mutex::default() }
    }

    /// The caps.
    pub fn caps(&self) -> SessionCaps {
        self.caps
    }

    /// Whether `owner` may open another session (checked before one is made, so no
    /// sandbox starts for nothing; [`Self::insert`] checks again, and that one holds).
    pub fn may_open(&self, owner: &Owner) -> Result<(), ServiceError> {
        self.check_caps(&self.open.lock().expect("sessions"), owner)
    }

    fn check_caps(&self, open: &HashMap<String, Arc<Entry>>, owner: &Owner) -> Result<(), ServiceError> {
        let busy = |message: String| Err(ServiceError::new(ErrorCode::Busy, message));
        if self.caps.max_sessions.is_some_and(|max| open.len() >= max) {
            return busy(format!("{} sessions are open on this server (its limit); close one first", open.len()));
        }
        if let Some(max) = self.caps.max_sessions_per_token {
            let held = open.values().filter(|e| e.owner.token == owner.token).count();
            if held >= max {
                return busy(format!("this token holds {held} sessions (its limit); close one first"));
            }
        }
        if let Some(max) = self.caps.max_sessions_per_connection {
            let held = open.values().filter(|e| e.owner.connection == owner.connection).count();
            if held >= max {
                return busy(format!("this connection holds {held} sessions (its limit); close one first"));
            }
        }
        Ok(())
    }

    /// Keep a new session of `owner`, or refuse over a cap (the session then ends).
    pub fn insert(&self, owner: &Owner, new: NewEntry) -> Result<String, ServiceError> {
        let id = new.session.id().to_string();
        self.insert_as(owner, id, new)
    }

    /// As [`Self::insert`], under an id clients already hold (a session carried over
    /// from another replica keeps its id; its engine session is a new one).
    pub fn insert_as(&self, owner: &Owner, id: String, new: NewEntry) -> Result<String, ServiceError> {
        let mut open = self.open.lock().expect("sessions");
        self.check_caps(&open, owner)?;
        let entry = Entry {
            id: id.clone(),
            session: Mutex::new(Arc::new(new.session)),
            bridge: new.bridge,
            options: new.options,
            owner: owner.clone(),
            implicit: new.implicit,
            last_used: Mutex::new(Instant::now()),
            in_use: AtomicUsize::new(0),
            executing: AtomicBool::new(false),
        };
        open.insert(id.clone(), Arc::new(entry));
        Ok(id)
    }

    /// Session `id` of `owner`, marked in use until the guard drops.
    pub fn acquire(&self, owner: &Owner, id: &str) -> Result<InUse, ServiceError> {
        let open = self.open.lock().expect("sessions");
        match open.get(id).filter(|e| e.belongs_to(owner)) {
            Some(entry) => {
                entry.in_use.fetch_add(1, Ordering::SeqCst);
                entry.touch();
                Ok(InUse(entry.clone()))
            }
            None => Err(self.gone(owner, id)),
        }
    }

    /// Every open session, whoever owns it (to save them at shutdown).
    pub fn entries(&self) -> Vec<Arc<Entry>> {
        self.open.lock().expect("sessions").values().cloned().collect()
    }

    /// Whether session `id` is open (whoever owns it).
    pub fn contains(&self, id: &str) -> bool {
        self.open.lock().expect("sessions").contains_key(id)
    }

    /// Why `owner` cannot reach `id`: closed for idleness (said only to its own token),
    /// else unknown, in the same words whether it exists for someone else or not.
    pub fn gone(&self, owner: &Owner, id: &str) -> ServiceError {
        // Another replica's id (its node tag is not ours): whatever it was, it is not
        // here and cannot be; say so rather than "unknown", so that a client behind a
        // balancer knows its session's replica went away. (Any id of that shape gets this
        // answer, so it tells nothing about whether such a session existed.)
        if let Some(node) = rsandbox::ids::node_of(id).filter(|node| *node != rsandbox::ids::node()) {
            return ServiceError::new(
                ErrorCode::SessionLost,
                format!(
                    "session {} was held by replica {node}, which no longer serves it (stopped or killed): \
                     its state is gone; start a new session",
                    rsandbox::quote_excerpt(id)
                ),
            );
        }
        let closed = self.idle_closed.lock().expect("idle-closed");
        match closed.iter().rev().find(|(h, token, _)| h == id && *token == owner.token) {
            Some((_, _, idle)) => ServiceError::new(
                ErrorCode::SessionClosed,
                format!(
                    "session {} was closed after {} s without use (the server's idle timeout); start a new one",
                    rsandbox::quote_excerpt(id),
                    idle.as_secs()
                ),
            ),
            None => ServiceError::new(
                ErrorCode::UnknownSession,
                format!("no session {} (it was closed, or never existed)", rsandbox::quote_excerpt(id)),
            ),
        }
    }

    /// Close `owner`'s session `id`: waiting tool calls fail now (so an execute still
    /// running returns instead of waiting out its timeout); the sandbox ends when the
    /// last use does.
    pub fn remove(&self, owner: &Owner, id: &str) -> Result<(), ServiceError> {
        let removed = {
            let mut open = self.open.lock().expect("sessions");
            match open.get(id) {
                Some(e) if e.belongs_to(owner) => open.remove(id),
                _ => None,
            }
        };
        match removed {
            Some(entry) => {
                entry.bridge.close("the session was closed");
                Ok(())
            }
            None => Err(self.gone(owner, id)),
        }
    }

    /// Close session `id` whoever owns it (a connection's implicit session as the
    /// connection ends).
    pub fn remove_any(&self, id: &str) {
        let removed = self.open.lock().expect("sessions").remove(id);
        if let Some(entry) = removed {
            entry.bridge.close("the session was closed");
        }
    }

    /// `owner`'s sessions, in the order of their ids.
    pub fn sessions_of(&self, owner: &Owner) -> Vec<Arc<Entry>> {
        let open = self.open.lock().expect("sessions");
        let mut mine: Vec<Arc<Entry>> = open.values().filter(|e| e.belongs_to(owner)).cloned().collect();
        mine.sort_by(|a, b| a.id.cmp(&b.id));
        mine
    }

    /// Sessions open.
    pub fn len(&self) -> usize {
        self.open.lock().expect("sessions").len()
    }

    /// Whether none is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hand a client's answer to the session whose tool call `call` waits for it (the
    /// stdio protocol's `tool_result` names no session; call ids are unique in the
    /// process); `false` when none waits.
    pub fn answer_call(&self, call: &str, answer: Result<serde_json::Value, String>) -> bool {
        let bridges: Vec<Arc<ToolBridge>> =
            self.open.lock().expect("sessions").values().map(|e| e.bridge.clone()).collect();
        let Some(bridge) = bridges.iter().find(|b| b.waits_for(call)) else { return false };
        bridge.answer(call, answer)
    }

    /// Fail every waiting tool call and every later one (the client is gone); the
    /// sessions stay until closed.
    pub fn close_bridges(&self, why: &str) {
        let bridges: Vec<Arc<ToolBridge>> =
            self.open.lock().expect("sessions").values().map(|e| e.bridge.clone()).collect();
        for bridge in bridges {
            bridge.close(why);
        }
    }

    /// End every session (at shutdown).
    pub fn close_all(&self) {
        let all: Vec<Arc<Entry>> = self.open.lock().expect("sessions").drain().map(|(_, e)| e).collect();
        for entry in &all {
            entry.bridge.close("the server is stopping");
        }
        // The sandboxes end here, outside the lock.
        drop(all);
    }

    /// Close every session unused for the idle timeout (none in use).
    pub fn close_idle(&self) {
        let Some(timeout) = self.caps.idle_timeout else { return };
        let now = Instant::now();
        let expired: Vec<(Arc<Entry>, Duration)> = {
            let mut open = self.open.lock().expect("sessions");
            let ids: Vec<String> = open
                .iter()
                .filter(|(_, e)| {
                    e.in_use.load(Ordering::SeqCst) == 0
                        && now.duration_since(*e.last_used.lock().expect("last used")) >= timeout
                })
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter()
                .filter_map(|id| open.remove(id))
                .map(|e| {
                    let idle = now.duration_since(*e.last_used.lock().expect("last used"));
                    (e, idle)
                })
                .collect()
        };
        let mut closed = self.idle_closed.lock().expect("idle-closed");
        for (entry, idle) in &expired {
            entry.bridge.close("the session was closed for idleness");
            closed.push_back((entry.id.clone(), entry.owner.token.clone(), *idle));
            if closed.len() > REMEMBERED_CLOSED {
                closed.pop_front();
            }
        }
        drop(closed);
        // The sandboxes end here, outside the locks.
        drop(expired);
    }
}
