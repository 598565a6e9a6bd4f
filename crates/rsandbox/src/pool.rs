//! A pool of pre-forked, locked-down children served concurrently: a request takes a
//! child that is already waiting, so it does not wait for a fork; a background thread
//! forks replacements. [`Pool::eval`] uses a child for one evaluation (every use starts
//! from a clean R); [`Pool::session`] lends one for several executes with state kept,
//! and on return either resets it (a fresh child next time) or keeps it for the next
//! borrower, as configured.

use crate::errors::EngineError;
use crate::options::EvalOptions;
use crate::result::EvalResult;
use crate::{Engine, Prepared};
use serde::Serialize;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Counts of the pool's children.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PoolStatus {
    /// Forked, locked down and waiting.
    pub idle: usize,
    /// Running a request.
    pub busy: usize,
    /// Found dead while idle and discarded (since the pool started).
    pub dead: usize,
    /// Concurrent requests allowed.
    pub size: usize,
}

#[derive(Default)]
struct State {
    idle: Vec<Prepared>,
    /// Forks in progress by the replenishers (counted so they do not overshoot).
    forking: usize,
    busy: usize,
    dead: usize,
    closed: bool,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

/// A pool of `size` concurrent sandboxes with fixed limits.
pub struct Pool {
    engine: Engine,
    options: EvalOptions,
    size: usize,
    acquire_timeout: Duration,
    shared: Shared,
    reset_between_uses: bool,
}

/// A pooled child lent out for several executes; returned to the pool on drop.
pub struct PooledSession<'p> {
    pool: &'p Pool,
    prepared: Option<Prepared>,
    id: String,
}

impl Pool {
    /// Start a pool and fork its first `size` children before returning.
    pub fn new(engine: Engine, size: usize, options: EvalOptions, acquire_timeout: Duration) -> Result<Pool, EngineError> {
        options.validate()?;
        if size == 0 {
            return Err(crate::InputError::BadLimit { what: "pool size".into(), value: "0".into() }.into());
        }
        let shared: Shared = Arc::default();
        for _ in 0..size {
            let prepared = engine.prepare_warm(&options)?;
            shared.0.lock().expect("pool").idle.push(prepared);
        }
        // Children lock themselves down in parallel: one replenisher per core keeps the
        // zygote's (serial) forks and the children's lockdowns overlapping.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        for _ in 0..cores.min(size) {
            spawn_replenisher(engine.clone(), options.clone(), size, shared.clone());
        }
        Ok(Pool { engine, options, size, acquire_timeout, shared, reset_between_uses: true })
    }

    /// Whether a session returned to the pool is reset (default) or handed, state and
    /// all, to the next borrower.
    pub fn reset_between_uses(mut self, reset: bool) -> Pool {
        self.reset_between_uses = reset;
        self
    }

    /// Borrow a child for several executes (state kept between them).
    pub fn session(&self) -> Result<PooledSession<'_>, EngineError> {
        let prepared = match self.acquire()? {
            Some(p) => p,
            None => match self.engine.prepare(&self.options, &[]) {
                Ok(p) => p,
                Err(e) => {
                    self.release();
                    return Err(e);
                }
            },
        };
        Ok(PooledSession { pool: self, prepared: Some(prepared), id: self.engine.new_id("pooled") })
    }

    /// Evaluate in a fresh child; waits up to the acquire timeout for a free slot.
    pub fn eval(&self, code: &str, timeout: Option<Duration>) -> Result<EvalResult, EngineError> {
        crate::options::validate_code(code)?;
        let mut prepared = self.acquire()?;
        let options = EvalOptions { timeout: timeout.unwrap_or(self.options.timeout), ..self.options.clone() };
        let id = self.engine.new_id("pool");
        let prepared = match prepared.take() {
            Some(p) => Ok(p),
            None => self.engine.prepare(&self.options, &[]),
        };
        let result = prepared.and_then(|mut p| {
            let result = self.engine.run(&mut p, &id, code, &options, &[], 0);
            self.engine.retire(p);
            result
        });
        self.release();
        result
    }

    /// Take a slot (and an idle child if there is one).
    fn acquire(&self) -> Result<Option<Prepared>, EngineError> {
        let (lock, cond) = &*self.shared;
        let deadline = Instant::now() + self.acquire_timeout;
        let mut state = lock.lock().expect("pool");
        while state.busy >= self.size {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(EngineError::AcquireTimeout(self.acquire_timeout));
            }
            state = cond.wait_timeout(state, left).expect("pool").0;
        }
        state.busy += 1;
        while let Some(p) = state.idle.pop() {
            if p.child.is_alive() {
                cond.notify_all();
                return Ok(Some(p));
            }
            state.dead += 1;
        }
        cond.notify_all();
        Ok(None)
    }

    fn release(&self) {
        let (lock, cond) = &*self.shared;
        lock.lock().expect("pool").busy -= 1;
        cond.notify_all();
    }

    /// Idle, busy and dead counts.
    pub fn status(&self) -> PoolStatus {
        let state = self.shared.0.lock().expect("pool");
        PoolStatus { idle: state.idle.len(), busy: state.busy, dead: state.dead, size: self.size }
    }
}

impl PooledSession<'_> {
    /// Run code; a child that died (timeout, limit, crash) is replaced and the result
    /// says `reset`.
    pub fn execute(&mut self, code: &str, timeout: Option<Duration>) -> Result<EvalResult, EngineError> {
        let pool = self.pool;
        if self.prepared.is_none() {
            self.prepared = Some(pool.engine.prepare(&pool.options, &[])?);
        }
        let options = EvalOptions { timeout: timeout.unwrap_or(pool.options.timeout), ..pool.options.clone() };
        let prepared = self.prepared.as_mut().expect("just filled");
        let mut result = pool.engine.run(prepared, &self.id, code, &options, &[], 0)?;
        if !prepared.child.is_alive() {
            if let Some(dead) = self.prepared.take() {
                pool.engine.retire(dead);
            }
            result.reset = true;
            result.reset_reason = Some(result.outcome.name());
        }
        Ok(result)
    }
}

impl Drop for PooledSession<'_> {
    fn drop(&mut self) {
        if let Some(prepared) = self.prepared.take() {
            if self.pool.reset_between_uses || !prepared.child.is_alive() {
                self.pool.engine.retire(prepared);
            } else {
                let (lock, cond) = &*self.pool.shared;
                lock.lock().expect("pool").idle.push(prepared);
                cond.notify_all();
            }
        }
        self.pool.release();
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let (lock, cond) = &*self.shared;
        let mut state = lock.lock().expect("pool");
        state.closed = true;
        state.idle.clear();
        cond.notify_all();
    }
}

/// Keep `size` children idle: fork a replacement whenever one is taken.
fn spawn_replenisher(engine: Engine, options: EvalOptions, size: usize, shared: Shared) {
    std::thread::Builder::new()
        .name("rsandbox-pool".into())
        .spawn(move || loop {
            {
                let (lock, cond) = &*shared;
                let mut state = lock.lock().expect("pool");
                while !state.closed && state.idle.len() + state.forking >= size {
                    state = cond.wait(state).expect("pool");
                }
                if state.closed {
                    return;
                }
                state.forking += 1;
            }
            let prepared = engine.prepare_warm(&options);
            let (lock, cond) = &*shared;
            let mut state = lock.lock().expect("pool");
            state.forking -= 1;
            match prepared {
                Ok(prepared) => {
                    if state.closed {
                        return;
                    }
                    state.idle.push(prepared);
                    cond.notify_all();
                }
                // A failed fork (zygote restarting): back off, then try again.
                Err(e) => {
                    drop(state);
                    eprintln!("rsandbox: pool failed to fork a child: {e}");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        })
        .expect("failed to start the pool thread");
}
