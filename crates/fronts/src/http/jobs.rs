//! Async jobs: an evaluation that runs after its request returned (`POST /v1/jobs` →
//! `{job}`), polled with `GET /v1/jobs/{job}`. Running jobs count against their token's
//! in-flight cap; a finished job's result is kept for the retention period, and per
//! token at most the server's count and bytes of finished results (`Caps`; the oldest
//! go first), so results nobody fetches cannot pile up.

use super::errors::{ApiError, ErrorBody};
use rsandbox::EvalResult;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a job is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Still running.
    Running,
    /// Finished with a result (whatever its outcome).
    Done,
    /// No result: the request failed (its error says why).
    Failed,
}

/// A job, as `GET /v1/jobs/{job}` shows it.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct JobView {
    /// The job's id.
    pub job: String,
    /// Its state.
    pub state: JobState,
    /// The result, once `done`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<EvalResult>>,
    /// The error, once `failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<super::errors::ErrorDetail>,
}

struct Job {
    owner: String,
    finished: Option<Instant>,
    /// Bytes of its result or error as JSON, once finished.
    bytes: u64,
    /// The order it finished in (instants may tie).
    seq: u64,
    view: JobView,
}

/// Every job the server knows.
pub struct Jobs {
    jobs: Mutex<HashMap<String, Job>>,
    retention: Duration,
    max_finished: usize,
    max_finished_bytes: u64,
    finished_count: std::sync::atomic::AtomicU64,
}

impl Jobs {
    pub fn new(caps: &crate::core::Caps) -> Jobs {
        Jobs {
            jobs: Mutex::default(),
            retention: caps.job_retention,
            max_finished: caps.max_finished_jobs_per_token.max(1),
            max_finished_bytes: caps.max_finished_job_bytes_per_token,
            finished_count: Default::default(),
        }
    }

    /// A new running job of `owner`.
    pub fn start(&self, owner: &str) -> JobView {
        let id = rsandbox::ids::job_id();
        let view = JobView { job: id.clone(), state: JobState::Running, result: None, error: None };
        let mut jobs = self.jobs.lock().expect("jobs");
        self.prune(&mut jobs, owner);
        jobs.insert(id, Job { owner: owner.to_string(), finished: None, bytes: 0, seq: 0, view: view.clone() });
        view
    }

    /// Record how job `id` ended; the owner's oldest finished jobs go when the count or
    /// the bytes kept pass the caps.
    pub fn finish(&self, id: &str, outcome: Result<EvalResult, ErrorBody>) {
        let mut jobs = self.jobs.lock().expect("jobs");
        let Some(job) = jobs.get_mut(id) else { return };
        job.finished = Some(Instant::now());
        match outcome {
            Ok(result) => (job.view.state, job.view.result) = (JobState::Done, Some(Box::new(result))),
            Err(body) => (job.view.state, job.view.error) = (JobState::Failed, Some(body.error)),
        }
        job.bytes = serde_json::to_vec(&job.view).map_or(0, |v| v.len() as u64);
        job.seq = self.finished_count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let owner = job.owner.clone();
        self.prune(&mut jobs, &owner);
    }

    /// Job `id` of `owner` (404 for another token's, as for none, or one expired).
    pub fn get(&self, owner: &str, id: &str) -> Result<JobView, ApiError> {
        let mut jobs = self.jobs.lock().expect("jobs");
        self.prune(&mut jobs, owner);
        match jobs.get(id) {
            Some(job) if job.owner == owner => Ok(job.view.clone()),
            _ => Err(ApiError::not_found(format!("no job {}", rsandbox::quote_excerpt(id)))),
        }
    }

    /// Jobs running now (all tokens).
    pub fn running(&self) -> usize {
        self.jobs.lock().expect("jobs").values().filter(|j| j.finished.is_none()).count()
    }

    /// Drop finished jobs past the retention period, and `owner`'s oldest beyond the
    /// caps on count and bytes.
    fn prune(&self, jobs: &mut HashMap<String, Job>, owner: &str) {
        let now = Instant::now();
        jobs.retain(|_, j| j.finished.is_none_or(|t| now.duration_since(t) < self.retention));
        let mut finished: Vec<(u64, String, u64)> = jobs
            .iter()
            .filter(|(_, j)| j.owner == owner && j.finished.is_some())
            .map(|(id, j)| (j.seq, id.clone(), j.bytes))
            .collect();
        finished.sort();
        let (mut count, mut bytes) = (finished.len(), finished.iter().map(|(_, _, b)| b).sum::<u64>());
        for (_, id, size) in finished {
            if count <= self.max_finished && bytes <= self.max_finished_bytes {
                break;
            }
            jobs.remove(&id);
            (count, bytes) = (count - 1, bytes - size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Caps, ServiceError};

    fn failed(jobs: &Jobs, owner: &str, message: &str) -> String {
        let id = jobs.start(owner).job;
        jobs.finish(&id, Err(ServiceError::bad_input(message).into()));
        id
    }

    /// Finished results nobody fetches are bounded per token, by count and by bytes;
    /// another token's are untouched.
    #[test]
    fn finished_jobs_are_bounded_in_count_and_bytes() {
        let caps =
            Caps { max_finished_jobs_per_token: 2, max_finished_job_bytes_per_token: 1 << 20, ..Caps::default() };
        let jobs = Jobs::new(&caps);
        let theirs = failed(&jobs, "bob", "x");
        let ids: Vec<String> = (0..3).map(|n| failed(&jobs, "alice", &n.to_string())).collect();
        assert!(jobs.get("alice", &ids[0]).is_err(), "the oldest went past the count");
        assert!(jobs.get("alice", &ids[1]).is_ok() && jobs.get("alice", &ids[2]).is_ok());
        assert!(jobs.get("bob", &theirs).is_ok());

        let caps = Caps { max_finished_jobs_per_token: 100, max_finished_job_bytes_per_token: 3000, ..Caps::default() };
        let jobs = Jobs::new(&caps);
        let big = "x".repeat(1000);
        let ids: Vec<String> = (0..4).map(|_| failed(&jobs, "alice", &big)).collect();
        let kept = ids.iter().filter(|id| jobs.get("alice", id).is_ok()).count();
        assert_eq!(kept, 2, "about 1 KB each within 3000 bytes");
        assert!(jobs.get("alice", &ids[3]).is_ok(), "the newest is kept");
    }
}
