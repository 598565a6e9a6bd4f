//! Async jobs: an evaluation that runs after its request returned (`POST /v1/jobs` →
//! `{job}`), polled with `GET /v1/jobs/{job}`. Running jobs count against their token's
//! in-flight cap; a finished job's result is kept for the retention period and at most
//! [`MAX_FINISHED_PER_TOKEN`] per token (the oldest go first), so results nobody
//! fetches cannot pile up.

use super::errors::{ApiError, ErrorBody};
use rsandbox::EvalResult;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Finished jobs kept per token.
pub const MAX_FINISHED_PER_TOKEN: usize = 100;

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
    view: JobView,
}

/// Every job the server knows.
pub struct Jobs {
    jobs: Mutex<HashMap<String, Job>>,
    retention: Duration,
}

impl Jobs {
    pub fn new(retention: Duration) -> Jobs {
        Jobs { jobs: Mutex::default(), retention }
    }

    /// A new running job of `owner`.
    pub fn start(&self, owner: &str) -> JobView {
        let id = rsandbox::ids::job_id();
        let view = JobView { job: id.clone(), state: JobState::Running, result: None, error: None };
        let mut jobs = self.jobs.lock().expect("jobs");
        self.prune(&mut jobs, owner);
        jobs.insert(id, Job { owner: owner.to_string(), finished: None, view: view.clone() });
        view
    }

    /// Record how job `id` ended.
    pub fn finish(&self, id: &str, outcome: Result<EvalResult, ErrorBody>) {
        let mut jobs = self.jobs.lock().expect("jobs");
        if let Some(job) = jobs.get_mut(id) {
            job.finished = Some(Instant::now());
            match outcome {
                Ok(result) => (job.view.state, job.view.result) = (JobState::Done, Some(Box::new(result))),
                Err(body) => (job.view.state, job.view.error) = (JobState::Failed, Some(body.error)),
            }
        }
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

    /// Drop finished jobs past the retention period, and `owner`'s oldest beyond the cap.
    fn prune(&self, jobs: &mut HashMap<String, Job>, owner: &str) {
        let now = Instant::now();
        jobs.retain(|_, j| j.finished.is_none_or(|t| now.duration_since(t) < self.retention));
        let mut finished: Vec<(Instant, String)> = jobs
            .iter()
            .filter(|(_, j)| j.owner == owner)
            .filter_map(|(id, j)| j.finished.map(|t| (t, id.clone())))
            .collect();
        if finished.len() >= MAX_FINISHED_PER_TOKEN {
            finished.sort();
            for (_, id) in finished.iter().take(finished.len() + 1 - MAX_FINISHED_PER_TOKEN) {
                jobs.remove(id);
            }
        }
    }
}
