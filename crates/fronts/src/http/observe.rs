//! What an operator sees: a request id on every response (`x-request-id`) and in every
//! log line of that request, one structured log line per request (`tracing`; the CLI
//! prints them as JSON) holding its result's outcome, and the counters and latency
//! histograms of `/metrics`. A result that comes after its request was answered (a job's,
//! a stream's) has a line of its own.

use axum::extract::{MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tracing::Instrument as _;

/// The header carrying the request id, both ways.
pub const REQUEST_ID: &str = "x-request-id";

/// Upper bounds (seconds) of the latency histogram's buckets.
const BUCKETS: [f64; 14] = [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0];

/// Who asked, set by the token check: its name in logs and metrics.
#[derive(Clone, Debug)]
pub struct Caller(pub String);

/// A result's outcome and time, for the log line of the request it answers: one line a
/// request, written before the answer is sent (with a second line, a fresh `1+1` 15 ms
/// apart took 1.00-1.03 of the time).
#[derive(Clone, Debug)]
pub struct AnsweredResult {
    outcome: String,
    wall_ms: u64,
}

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if let Some(i) = BUCKETS.iter().position(|&b| seconds <= b) {
            self.counts[i] += 1;
        }
        self.count += 1;
        self.sum += seconds;
    }
}

/// The gauges `/metrics` shows beside the counters, read from the state by the route
/// (so this module needs nothing of the state's).
pub struct Gauges {
    /// Sessions open.
    pub sessions: usize,
    /// Sandboxes running a request now.
    pub busy: usize,
    /// Pre-forked sandboxes waiting for work.
    pub pool_idle: usize,
    /// Jobs running.
    pub jobs_running: usize,
    /// Requests waiting while a sandbox is forked for them (none was ready).
    pub queue: usize,
}

/// The counters.
#[derive(Default)]
pub struct Metrics {
    /// (route, status, token name) → requests.
    requests: Mutex<BTreeMap<(String, u16, String), u64>>,
    /// route → latency.
    latency: Mutex<BTreeMap<String, Histogram>>,
    /// outcome → results.
    outcomes: Mutex<BTreeMap<String, u64>>,
    /// system call → violations.
    violations: Mutex<BTreeMap<String, u64>>,
    next_id: AtomicU64,
}

impl Metrics {
    /// Count a result's outcome (and its violation); what the request's log line says of
    /// it, put into the response's extensions by the route that answers with the result.
    pub fn result(&self, result: &rsandbox::EvalResult) -> AnsweredResult {
        let outcome = result.outcome.name();
        *self.outcomes.lock().expect("metrics").entry(outcome.clone()).or_default() += 1;
        if let Some(v) = &result.violation {
            *self.violations.lock().expect("metrics").entry(v.syscall.clone()).or_default() += 1;
        }
        AnsweredResult { outcome, wall_ms: result.usage.wall_ms }
    }

    /// Count a result whose request was answered before it came (a job, a stream), and
    /// log it in the request's span: its line of its own.
    pub fn result_after_answer(&self, result: &rsandbox::EvalResult) {
        let AnsweredResult { outcome, wall_ms } = self.result(result);
        tracing::info!(outcome = %outcome, wall_ms, "result");
    }

    fn request(&self, route: &str, status: u16, token: &str, seconds: f64) {
        *self.requests.lock().expect("metrics").entry((route.to_string(), status, token.to_string())).or_default() += 1;
        self.latency.lock().expect("metrics").entry(route.to_string()).or_default().observe(seconds);
    }

    /// The Prometheus text.
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut t = String::new();
        t.push_str("# HELP rsandbox_http_requests_total Requests answered, by route, status and token name (- before the token check).\n# TYPE rsandbox_http_requests_total counter\n");
        for ((route, status, token), n) in self.requests.lock().expect("metrics").iter() {
            let _ = writeln!(
                t,
                "rsandbox_http_requests_total{{route=\"{route}\",status=\"{status}\",token=\"{token}\"}} {n}"
            );
        }
        t.push_str("# HELP rsandbox_http_request_seconds Time to answer, by route.\n# TYPE rsandbox_http_request_seconds histogram\n");
        for (route, h) in self.latency.lock().expect("metrics").iter() {
            let mut cumulative = 0;
            for (bound, n) in BUCKETS.iter().zip(h.counts) {
                cumulative += n;
                let _ = writeln!(
                    t,
                    "rsandbox_http_request_seconds_bucket{{route=\"{route}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            let _ = writeln!(t, "rsandbox_http_request_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(t, "rsandbox_http_request_seconds_sum{{route=\"{route}\"}} {}", h.sum);
            let _ = writeln!(t, "rsandbox_http_request_seconds_count{{route=\"{route}\"}} {}", h.count);
        }
        t.push_str("# HELP rsandbox_outcomes_total Results, by outcome.\n# TYPE rsandbox_outcomes_total counter\n");
        for (outcome, n) in self.outcomes.lock().expect("metrics").iter() {
            let _ = writeln!(t, "rsandbox_outcomes_total{{outcome=\"{outcome}\"}} {n}");
        }
        t.push_str("# HELP rsandbox_violations_total Sandboxes ended by a forbidden system call, by call.\n# TYPE rsandbox_violations_total counter\n");
        for (syscall, n) in self.violations.lock().expect("metrics").iter() {
            let _ = writeln!(t, "rsandbox_violations_total{{syscall=\"{syscall}\"}} {n}");
        }
        let _ = write!(
            t,
            "# HELP rsandbox_sessions Sessions open.\n# TYPE rsandbox_sessions gauge\nrsandbox_sessions {}\n\
             # HELP rsandbox_sandboxes_busy Sandboxes running a request now (evals, executes, jobs).\n# TYPE rsandbox_sandboxes_busy gauge\nrsandbox_sandboxes_busy {}\n\
             # HELP rsandbox_pool_idle Pre-forked sandboxes waiting for work.\n# TYPE rsandbox_pool_idle gauge\nrsandbox_pool_idle {}\n\
             # HELP rsandbox_jobs_running Jobs running.\n# TYPE rsandbox_jobs_running gauge\nrsandbox_jobs_running {}\n\
             # HELP rsandbox_queue Requests waiting while a sandbox is forked for them (none was ready).\n# TYPE rsandbox_queue gauge\nrsandbox_queue {}\n",
            gauges.sessions, gauges.busy, gauges.pool_idle, gauges.jobs_running, gauges.queue,
        );
        t
    }
}

/// A client's id if it is short and plain, else a new one.
fn request_id(metrics: &Metrics, request: &Request) -> String {
    let given = request.headers().get(REQUEST_ID).and_then(|v| v.to_str().ok());
    match given {
        Some(id)
            if !id.is_empty()
                && id.len() <= 64
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) =>
        {
            id.to_string()
        }
        _ => format!("req-{}", metrics.next_id.fetch_add(1, Ordering::SeqCst)),
    }
}

/// Around every request: its id, its span, its log line and its counters.
pub async fn observe(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = request_id(&metrics, &request);
    let route =
        request.extensions().get::<MatchedPath>().map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let method = request.method().clone();
    let span = tracing::info_span!("request", request_id = %id, method = %method, route = %route);
    let mut response = next.run(request).instrument(span.clone()).await;
    let seconds = started.elapsed().as_secs_f64();
    let status = response.status().as_u16();
    let caller = response.extensions().get::<Caller>().map_or("-", |c| c.0.as_str()).to_string();
    metrics.request(&route, status, &caller, seconds);
    let result = response.extensions().get::<AnsweredResult>();
    let (outcome, wall_ms) = (result.map(|r| r.outcome.as_str()), result.map(|r| r.wall_ms));
    let ms = (seconds * 1000.0).round() as u64;
    span.in_scope(|| tracing::info!(status, token = %caller, ms, outcome, wall_ms, "answered"));
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}
