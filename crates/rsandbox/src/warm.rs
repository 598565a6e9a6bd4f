//! Children forked ahead of requests. A [`WarmSet`] keeps a number of locked-down,
//! warmed-up children with one limit set waiting, and forks replacements off the
//! request path; [`WarmSets`] holds one set per limit set in use (the engine's, so every
//! front serves `eval` and `session.create` from children that already exist), and
//! [`crate::Pool`] adds a bound on concurrent use on top of one set.

use crate::options::EvalOptions;
use crate::{Engine, EngineInner, Prepared};
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// Longest a replacement waits for the request that took a child to be answered.
/// Forking, locking down and warming a replacement costs a few milliseconds of CPU;
/// on two cores, done while the request runs, it took a core from that request (a
/// fresh `1+1` through `serve --stdio`: 1.5-4 ms with the replacement beside it). Most
/// requests are answered well within this; a longer one gets its replacement beside it
/// after this long, so the next request still finds a child.
const REPLACE_AFTER: Duration = Duration::from_millis(10);

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
    /// A network sandbox (its proxy serves this allowlist) is never one without, or
    /// one of another allowlist.
    network: Option<crate::network::Network>,
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
            network: o.network.clone(),
        }
    }
}

#[derive(Default)]
struct State {
    idle: Vec<Prepared>,
    /// Forks in progress by the replenishers (counted so they do not overshoot).
    forking: usize,
    /// Requests waiting for one of those forks (never more than `forking`).
    claimed: usize,
    /// Found dead while idle and discarded.
    dead: usize,
    /// Settled before they went idle (see [`State::idle_enough_to_settle`]).
    settled: usize,
    closed: bool,
    /// Children taken whose request is not answered yet and whose replacement has not
    /// started: (take number, when taken), oldest first. A replenisher starts the next
    /// replacement once the oldest is answered ([`Serving`] dropped) or
    /// [`REPLACE_AFTER`] old.
    serving: VecDeque<(u64, Instant)>,
    takes: u64,
}

/// A child taken from a warm set for a request: dropped when the request is answered
/// and the child is gone (the engine's reaper drops it after the child, see
/// `Prepared`), which lets its replacement start (see [`REPLACE_AFTER`]).
pub(crate) struct Serving {
    shared: Weak<(Mutex<State>, Condvar)>,
    take: u64,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let Some(shared) = self.shared.upgrade() else { return };
        let (lock, cond) = &*shared;
        let mut state = lock.lock().expect("warm set");
        let before = state.serving.len();
        state.serving.retain(|(take, _)| *take != self.take);
        if state.serving.len() != before {
            cond.notify_all();
        }
    }
}

impl State {
    /// Whether a child a replenisher has just made can be settled (its warm-up's garbage
    /// collected, `SandboxChild::settle`) before it joins the set: no request waits for
    /// it, no request's replacement is due, and with it the set is full. That collection
    /// takes most of a first request's copy-on-write faults off its path (a fresh `1+1`
    /// 15 ms apart: 16-17 faults in the child between its read of the request and its
    /// answer before, 3-4 after; p50 0.89-0.94 of before through `serve --stdio` and
    /// HTTP, two servers alternating), but costs 0.4-1.3 ms of CPU: made part of every
    /// child's warm-up it cost 10-28% of the sustained rate on two cores (S3), so only
    /// children nobody is waiting for are settled (S3 at 2 and 8 clients then: 373/410
    /// and 349/339 evaluations/s, against 359/333 and 294/347 before, alternating runs).
    fn idle_enough_to_settle(&self, target: usize) -> bool {
        self.claimed == 0 && self.serving.is_empty() && self.idle.len() + self.forking >= target
    }

    /// How long a replacement should still wait at `now`: not beside the request that
    /// took the oldest child still serving, unless that one runs past [`REPLACE_AFTER`].
    fn replacement_wait(&self, now: Instant) -> Option<Duration> {
        let (_, taken) = self.serving.front()?;
        Some((*taken + REPLACE_AFTER).saturating_duration_since(now)).filter(|left| !left.is_zero())
    }
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
    pub(crate) fn add(&self, mut prepared: Prepared) {
        // Answered (a pooled session handed back): dropped here, outside the lock its
        // drop takes.
        prepared.serving = None;
        let (lock, cond) = &*self.shared;
        lock.lock().expect("warm set").idle.push(prepared);
        cond.notify_all();
    }

    /// A waiting child, if there is one alive; the replenishers fork its replacement.
    /// With none waiting but a replenisher's fork under way that no other request has
    /// claimed, waits for that one (up to [`IN_FLIGHT_WAIT`]): it is ready sooner than a
    /// fork started now, which the zygote, forking one child at a time, would only begin
    /// after it, and which would not be warmed up. `None`: the caller forks its own.
    pub(crate) fn take(&self) -> Option<Prepared> {
        let (lock, cond) = &*self.shared;
        let deadline = Instant::now() + IN_FLIGHT_WAIT;
        let mut state = lock.lock().expect("warm set");
        let mut claimed = false;
        let found = loop {
            if let Some(p) = pop_alive(&mut state) {
                break Some(p);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let claimed_by_others = state.claimed - usize::from(claimed);
            if state.closed || state.forking <= claimed_by_others || left.is_zero() {
                break None;
            }
            if !claimed {
                state.claimed += 1;
                claimed = true;
            }
            state = cond.wait_timeout(state, left).expect("warm set").0;
        };
        state.claimed -= usize::from(claimed);
        let mut stale = None;
        let found = found.map(|mut prepared| {
            state.takes += 1;
            let take = state.takes;
            state.serving.push_back((take, Instant::now()));
            // Children enter the set without one (`add`, the replenishers); were one
            // left, its drop takes this lock: dropped below, after the lock.
            stale = prepared.serving.replace(Serving { shared: Arc::downgrade(&self.shared), take });
            prepared
        });
        // The replenishers start a replacement when this request is answered (its
        // `Serving` dropped), or REPLACE_AFTER after the take if they are told of it now.
        // Told only when no child is left waiting: waking them costs the request two
        // thread wake-ups (~20 µs in the call here, more where their CPU slept) for a
        // timer only a long request needs, and while another child waits, a long
        // request's replacement starts when it is answered or the next take empties the
        // set.
        if found.is_none() || state.idle.is_empty() {
            cond.notify_all();
        }
        drop(state);
        drop(stale);
        found
    }

    /// Stop forking: the waiting children are killed, and this waits (up to `grace`)
    /// until no replenisher is forking, i.e. none holds the engine any more (each lets
    /// go of it before it says its fork is over). Requests from now on fork their own.
    pub(crate) fn close(&self, grace: Duration) {
        let (lock, cond) = &*self.shared;
        let idle = {
            let mut state = lock.lock().expect("warm set");
            state.closed = true;
            std::mem::take(&mut state.idle)
        };
        cond.notify_all();
        // Outside the lock: each child waits for its exit report.
        drop(idle);
        let deadline = Instant::now() + grace;
        let mut state = lock.lock().expect("warm set");
        while state.forking > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = cond.wait_timeout(state, left).expect("warm set").0;
        }
    }

    /// Children waiting now, children found dead since the start, and children settled
    /// since the start.
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        let state = self.shared.0.lock().expect("warm set");
        (state.idle.len(), state.dead, state.settled)
    }
}

impl Drop for WarmSet {
    fn drop(&mut self) {
        self.close(Duration::ZERO);
    }
}

/// The longest a request waits for a replenisher's fork under way before forking its
/// own: a fork, lockdown and warm-up take a few milliseconds; far longer means the
/// zygote is in trouble, and the request's own fork reports why.
const IN_FLIGHT_WAIT: Duration = Duration::from_millis(250);

/// The first idle child still alive (the dead ones are counted and dropped).
fn pop_alive(state: &mut State) -> Option<Prepared> {
    while let Some(p) = state.idle.pop() {
        if p.child.is_alive() && !p.child.has_exited() {
            return Some(p);
        }
        state.dead += 1;
    }
    None
}

/// A replenisher's wait after a failed fork, doubled after each failure in a row up to
/// [`MAX_RETRY`]: a zygote restarting is back within the first, and a server out of
/// descriptors logs a failure a few times a minute instead of five times a second.
const FIRST_RETRY: Duration = Duration::from_millis(200);
const MAX_RETRY: Duration = Duration::from_secs(5);

fn next_retry(after: Duration) -> Duration {
    (after * 2).min(MAX_RETRY)
}

/// Keep `target` children idle: fork a replacement whenever one is taken. Holds the
/// engine weakly, so an engine nobody uses any more shuts down.
fn spawn_replenisher(engine: Weak<EngineInner>, options: EvalOptions, target: usize, shared: Shared) {
    std::thread::Builder::new()
        .name("rsandbox-warm".into())
        .spawn(move || {
            let mut retry = FIRST_RETRY;
            loop {
                {
                    let (lock, cond) = &*shared;
                    let mut state = lock.lock().expect("warm set");
                    loop {
                        if state.closed {
                            return;
                        }
                        if state.idle.len() + state.forking >= target {
                            state = cond.wait(state).expect("warm set");
                            continue;
                        }
                        match state.replacement_wait(Instant::now()) {
                            Some(left) => state = cond.wait_timeout(state, left).expect("warm set").0,
                            None => break,
                        }
                    }
                    // This replacement is the oldest taken child's.
                    state.serving.pop_front();
                    state.forking += 1;
                }
                let Some(engine) = Engine::upgrade(&engine) else { return };
                let mut prepared = engine.prepare_warm(&options);
                drop(engine);
                let mut settled = false;
                if let Ok(made) = &mut prepared {
                    if shared.0.lock().expect("warm set").idle_enough_to_settle(target) {
                        match made.child.settle() {
                            Ok(()) => settled = true,
                            Err(e) => prepared = Err(e),
                        }
                    }
                }
                let (lock, cond) = &*shared;
                let mut state = lock.lock().expect("warm set");
                state.forking -= 1;
                state.settled += usize::from(settled);
                match prepared {
                    Ok(prepared) if !state.closed => {
                        retry = FIRST_RETRY;
                        state.idle.push(prepared);
                        cond.notify_all();
                    }
                    Ok(late) => {
                        cond.notify_all();
                        drop(state);
                        drop(late);
                        return;
                    }
                    // A failed fork (zygote restarting, descriptors run out): back off, then
                    // try again. Requests meanwhile fork on demand and get the error themselves.
                    Err(e) => {
                        // A request waiting for this fork forks its own now.
                        cond.notify_all();
                        drop(state);
                        crate::note!("rsandbox: failed to fork a child ahead of requests (next try in {retry:?}): {e}");
                        std::thread::sleep(retry);
                        retry = next_retry(retry);
                    }
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

    /// Idle, dead and settled counts over all sets, and how many sets there are.
    pub(crate) fn status(&self) -> (usize, usize, usize, usize) {
        self.sets.iter().fold((0, 0, 0, self.sets.len()), |(idle, dead, settled, n), (_, set, _)| {
            let (i, d, s) = set.counts();
            (idle + i, dead + d, settled + s, n)
        })
    }

    /// Every set, to [`WarmSet::close`] outside the lock of the engine's sets.
    pub(crate) fn all(&self) -> Vec<Arc<WarmSet>> {
        self.sets.iter().map(|(_, set, _)| set.clone()).collect()
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
    fn a_replacement_waits_for_its_request_but_not_past_the_limit() {
        let now = Instant::now();
        let mut state = State::default();
        assert_eq!(state.replacement_wait(now), None, "nothing taken: nothing to wait for");
        state.serving.push_back((1, now));
        assert_eq!(state.replacement_wait(now), Some(REPLACE_AFTER));
        assert_eq!(state.replacement_wait(now + REPLACE_AFTER / 2), Some(REPLACE_AFTER / 2));
        assert_eq!(state.replacement_wait(now + REPLACE_AFTER), None, "a long request gets its replacement beside it");
        // Answered (its `Serving` dropped): the next one counts from its own take.
        state.serving.pop_front();
        state.serving.push_back((2, now + REPLACE_AFTER));
        assert_eq!(state.replacement_wait(now + REPLACE_AFTER), Some(REPLACE_AFTER));
    }

    #[test]
    fn only_a_child_nobody_waits_for_is_settled() {
        let target = 2;
        // The replenisher's own fork is counted in `forking` while it decides.
        let quiet = State { forking: 1, ..State::default() };
        assert!(!quiet.idle_enough_to_settle(target), "the set is not full with it: a request may come");
        let full = State { forking: 2, ..State::default() };
        assert!(full.idle_enough_to_settle(target));
        let waited_for = State { forking: 2, claimed: 1, ..State::default() };
        assert!(!waited_for.idle_enough_to_settle(target), "a request waits for this fork");
        let mut replacement_due = State { forking: 2, ..State::default() };
        replacement_due.serving.push_back((1, Instant::now()));
        assert!(!replacement_due.idle_enough_to_settle(target), "a request is being served: more may follow");
    }

    #[test]
    fn failed_forks_are_retried_ever_less_often_up_to_a_bound() {
        let mut waits = vec![FIRST_RETRY];
        for _ in 0..6 {
            waits.push(next_retry(*waits.last().unwrap()));
        }
        let ms: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [200, 400, 800, 1600, 3200, 5000, 5000]);
    }

    #[test]
    fn limit_sets_ignore_per_request_settings() {
        let a = EvalOptions::default();
        let b = EvalOptions { timeout: Duration::from_secs(1), max_output: 10, ..a.clone() };
        let c = EvalOptions { memory: Some(1 << 20), ..a.clone() };
        assert_eq!(LimitSet::from(&a), LimitSet::from(&b));
        assert_ne!(LimitSet::from(&a), LimitSet::from(&c));
    }
}
