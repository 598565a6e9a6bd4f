//! A pool of pre-forked, locked-down children served concurrently: a request takes a
//! child that is already waiting, so it does not wait for a fork; a background thread
//! forks replacements. [`Pool::eval`] uses a child for one evaluation (every use starts
//! from a clean R); [`Pool::session`] lends one for several executes with state kept,
//! and on return either resets it (a fresh child next time) or keeps it for the next
//! borrower, as configured.

use crate::errors::EngineError;
use crate::options::EvalOptions;
use crate::result::EvalResult;
use crate::warm::WarmSet;
use crate::{Engine, Prepared};
use serde::Serialize;
use std::sync::{Condvar, Mutex};
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

/// A pool of `size` concurrent sandboxes with fixed limits.
pub struct Pool {
    engine: Engine,
    options: EvalOptions,
    size: usize,
    acquire_timeout: Duration,
    /// Requests running now, bounded by `size`.
    busy: (Mutex<usize>, Condvar),
    children: WarmSet,
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
    pub fn new(
        engine: Engine,
        size: usize,
        options: EvalOptions,
        acquire_timeout: Duration,
    ) -> Result<Pool, EngineError> {
        options.validate()?;
        if size == 0 {
            return Err(crate::InputError::BadLimit { what: "pool size".into(), value: "0".into() }.into());
        }
        // The first children are forked here, so that a pool that cannot start says so.
        let mut first = Vec::with_capacity(size);
        for _ in 0..size {
            first.push(engine.prepare_warm(&options)?);
        }
        let children = WarmSet::start(&engine, options.clone(), size);
        first.into_iter().for_each(|p| children.add(p));
        let busy = (Mutex::new(0), Condvar::new());
        Ok(Pool { engine, options, size, acquire_timeout, busy, children, reset_between_uses: true })
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
            let result = self.engine.run(&mut p, &id, crate::Run::plain(code, &options));
            self.engine.retire(p);
            result
        });
        self.release();
        result
    }

    /// Take a slot (and an idle child if there is one).
    fn acquire(&self) -> Result<Option<Prepared>, EngineError> {
        let (lock, cond) = &self.busy;
        let deadline = Instant::now() + self.acquire_timeout;
        let mut busy = lock.lock().expect("pool");
        while *busy >= self.size {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(EngineError::AcquireTimeout(self.acquire_timeout));
            }
            busy = cond.wait_timeout(busy, left).expect("pool").0;
        }
        *busy += 1;
        drop(busy);
        Ok(self.children.take())
    }

    fn release(&self) {
        let (lock, cond) = &self.busy;
        *lock.lock().expect("pool") -= 1;
        cond.notify_all();
    }

    /// Idle, busy and dead counts.
    pub fn status(&self) -> PoolStatus {
        let (idle, dead, _) = self.children.counts();
        PoolStatus { idle, busy: *self.busy.0.lock().expect("pool"), dead, size: self.size }
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
        let mut result = pool.engine.run(prepared, &self.id, crate::Run::plain(code, &options))?;
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
                self.pool.children.add(prepared);
            }
        }
        self.pool.release();
    }
}
