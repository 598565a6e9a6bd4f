//! Children forked ahead of requests. A [`WarmSet`] keeps a number of locked-down,
//! warmed-up children with one limit set waiting, and forks replacements off the
//! request path; [`WarmSets`] holds one set per limit set in use (the engine's, so every
//! front serves `eval` and `session.create` from children that already exist), and
//! [`crate::Pool`] adds a bound on concurrent use on top of one set.

use crate::options::EvalOptions;
use crate::{Engine, EngineInner, Prepared};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// What makes two children interchangeable: the limits the child applied to itself.
/// The timeout and the output limit are the supervisor's, per request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LimitSet {
    cpu_seconds: Option<u64>,
    memory: Option<u64>,
    file_size: Option<u64>,
    disk: Option<u64>,
    processes: Option<u64>,
    open_files: Option<u64>,
}

impl From<&EvalOptions> for LimitSet {
    fn from(o: &EvalOptions) -> LimitSet {
        LimitSet {
            cpu_seconds: o.cpu_seconds,
            memory: o.memory,
            file_size: o.file_size,
            disk: o.disk,
            processes: o.processes,
            open_files: o.open_files,
        }
    }
}

#[derive(Default)]
struct State {
    idle: Vec<Prepared>,
    /// Forks in progress by the replenishers (counted so they do not overshoot).
    forking: usize,
    /// Found dead while idle and discarded.
    dead: usize,
    closed: bool,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

/// `target` children of one limit set, kept waiting.
pub(crate) struct WarmSet {
    shared: Shared,
}

impl WarmSet {
    /// Start the replenishers (one per core, at most `target`); they fork until
    /// `target` children wait. Returns at once.
    pub(crate) fn start(engine: &Engine, options: EvalOptions, target: usize) -> WarmSet {
        let shared: Shared = Arc::default();
        // Children lock themselves down in parallel: one replenisher per core keeps the
        // zygote's (serial) forks and the children's lockdowns overlapping.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        for _ in 0..cores.min(target) {
            spawn_replenisher(Arc::downgrade(&engine.inner), options.clone(), target, shared.clone());
        }
        WarmSet { shared }
    }

    /// Add a child forked by the caller (a pool's first children, forked before it
    /// returns, so that a start-up failure is the caller's error).
    pub(crate) fn add(&self, prepared: Prepared) {
        let (lock, cond) = &*self.shared;
        lock.lock().expect("warm set").idle.push(prepared);
        cond.notify_all();
    }

    /// A waiting child, if there is one alive; the replenishers fork its replacement.
    pub(crate) fn take(&self) -> Option<Prepared> {
        let (lock, cond) = &*self.shared;
        let mut state = lock.lock().expect("warm set");
        let mut found = None;
        while let Some(p) = state.idle.pop() {
            if p.child.is_alive() && !p.child.has_exited() {
                found = Some(p);
                break;
            }
            state.dead += 1;
        }
        cond.notify_all();
        found
    }

    /// Children waiting now, and children found dead since the start.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let state = self.shared.0.lock().expect("warm set");
        (state.idle.len(), state.dead)
    }
}

impl Drop for WarmSet {
    fn drop(&mut self) {
        let (lock, cond) = &*self.shared;
        let idle = {
            let mut state = lock.lock().expect("warm set");
            state.closed = true;
            std::mem::take(&mut state.idle)
        };
        cond.notify_all();
        // Outside the lock: each child waits for its exit report.
        drop(idle);
    }
}

/// Keep `target` children idle: fork a replacement whenever one is taken. Holds the
/// engine weakly, so an engine nobody uses any more shuts down.
fn spawn_replenisher(engine: Weak<EngineInner>, options: EvalOptions, target: usize, shared: Shared) {
    std::thread::Builder::new()
        .name("rsandbox-warm".into())
        .spawn(move || loop {
            {
                let (lock, cond) = &*shared;
                let mut state = lock.lock().expect("warm set");
                while !state.closed && state.idle.len() + state.forking >= target {
                    state = cond.wait(state).expect("warm set");
                }
                if state.closed {
                    return;
                }
                state.forking += 1;
            }
            let Some(engine) = Engine::upgrade(&engine) else { return };
            let prepared = engine.prepare_warm(&options);
            drop(engine);
            let (lock, cond) = &*shared;
            let mut state = lock.lock().expect("warm set");
            state.forking -= 1;
            match prepared {
                Ok(prepared) if !state.closed => {
                    state.idle.push(prepared);
                    cond.notify_all();
                }
                Ok(late) => {
                    drop(state);
                    drop(late);
                    return;
                }
                // A failed fork (zygote restarting): back off, then try again. Requests
                // meanwhile fork on demand and get the error themselves.
                Err(e) => {
                    drop(state);
                    crate::note!("rsandbox: failed to fork a child ahead of requests: {e}");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        })
        .expect("failed to start a replenisher thread");
}

/// Most limit sets kept warm at once; the least recently used goes first.
const MAX_WARM_SETS: usize = 4;

/// The engine's warm sets, one per limit set in use.
#[derive(Default)]
pub(crate) struct WarmSets {
    sets: Vec<(LimitSet, Arc<WarmSet>, Instant)>,
}

impl WarmSets {
    /// The set for `options`, started (and the least recently used set dropped) if new.
    pub(crate) fn set_for(&mut self, engine: &Engine, options: &EvalOptions, per_set: usize) -> Arc<WarmSet> {
        let key = LimitSet::from(options);
        if let Some(entry) = self.sets.iter_mut().find(|(k, _, _)| *k == key) {
            entry.2 = Instant::now();
            return entry.1.clone();
        }
        if self.sets.len() >= MAX_WARM_SETS {
            let oldest = self.sets.iter().enumerate().min_by_key(|(_, (_, _, used))| *used).map(|(i, _)| i);
            if let Some(i) = oldest {
                self.sets.swap_remove(i);
            }
        }
        let set = Arc::new(WarmSet::start(engine, options.clone(), per_set));
        self.sets.push((key, set.clone(), Instant::now()));
        set
    }

    /// Idle and dead counts over all sets, and how many sets there are.
    pub(crate) fn status(&self) -> (usize, usize, usize) {
        self.sets.iter().fold((0, 0, self.sets.len()), |(idle, dead, n), (_, set, _)| {
            let (i, d) = set.counts();
            (idle + i, dead + d, n)
        })
    }

    /// Drop every set (their children are killed).
    pub(crate) fn clear(&mut self) {
        self.sets.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_sets_ignore_per_request_settings() {
        let a = EvalOptions::default();
        let b = EvalOptions { timeout: Duration::from_secs(1), max_output: 10, ..a.clone() };
        let c = EvalOptions { memory: Some(1 << 20), ..a.clone() };
        assert_eq!(LimitSet::from(&a), LimitSet::from(&b));
        assert_ne!(LimitSet::from(&a), LimitSet::from(&c));
    }
}
