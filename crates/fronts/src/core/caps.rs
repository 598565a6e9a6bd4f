//! The server's ceilings, one type for every front: what one request may ask for
//! (timeout, memory, CPU, output), how many sessions may be open and for how long
//! unused, and what one token may have in flight, ask per minute and keep as finished
//! jobs. A request above a ceiling is refused ([`ErrorCode::BadInput`]), never lowered
//! silently; what it left to the defaults is brought within the ceilings.

use super::error::{ErrorCode, ServiceError};
use super::registry::SessionCaps;
use rsandbox::{EvalOptions, Limits};
use std::time::Duration;

/// The ceilings of one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Longest timeout a request may ask for.
    pub max_timeout: Duration,
    /// Most memory a request or session may ask for.
    pub max_memory: u64,
    /// Most CPU seconds a request may ask for.
    pub max_cpu: u64,
    /// Most output (stdout + stderr + result) a request may ask for.
    pub max_output: u64,
    /// How many sessions, and for how long unused.
    pub sessions: SessionCaps,
    /// Requests one token may have in flight (HTTP; jobs included).
    pub max_in_flight_per_token: usize,
    /// Requests one token may make per minute (HTTP; a fixed one-minute window).
    pub max_requests_per_minute_per_token: u32,
    /// How long a finished job's result is kept (HTTP).
    pub job_retention: Duration,
    /// Finished jobs kept per token (HTTP); the oldest go first.
    pub max_finished_jobs_per_token: usize,
    /// Bytes of finished jobs' results kept per token (HTTP); the oldest go first.
    pub max_finished_job_bytes_per_token: u64,
}

impl Default for Caps {
    /// The ceilings of a network server (`serve --http`).
    fn default() -> Caps {
        Caps {
            max_timeout: Duration::from_secs(300),
            max_memory: 4 << 30,
            max_cpu: 600,
            max_output: 64 << 20,
            sessions: SessionCaps {
                max_sessions: None,
                max_sessions_per_token: Some(16),
                max_sessions_per_connection: None,
                idle_timeout: None,
            },
            max_in_flight_per_token: 16,
            max_requests_per_minute_per_token: 1200,
            job_retention: Duration::from_secs(600),
            max_finished_jobs_per_token: 100,
            max_finished_job_bytes_per_token: 256 << 20,
        }
    }
}

impl Caps {
    /// The MCP server's defaults: sessions per server and per connection, closed after
    /// 15 minutes unused.
    pub fn mcp() -> Caps {
        Caps {
            sessions: SessionCaps {
                max_sessions: Some(32),
                max_sessions_per_token: None,
                max_sessions_per_connection: Some(8),
                idle_timeout: Some(Duration::from_secs(15 * 60)),
            },
            ..Caps::default()
        }
    }

    /// The stdio protocol's: one local client on a pipe (the R package), which may ask
    /// for a day and for as much memory and CPU as the machine's limits give; output and
    /// sessions stay bounded.
    pub fn stdio() -> Caps {
        Caps {
            max_timeout: rsandbox::limits::MAX_TIMEOUT,
            max_memory: u64::MAX,
            max_cpu: u64::MAX,
            max_output: 1 << 30,
            sessions: SessionCaps {
                max_sessions: Some(64),
                max_sessions_per_token: None,
                max_sessions_per_connection: None,
                idle_timeout: None,
            },
            ..Caps::default()
        }
    }

    /// The options for a request: what it asked (`asked`, and a timeout when
    /// `asked_timeout`) is refused above a ceiling; what it left to the defaults is
    /// brought within them.
    pub fn bound(
        &self,
        mut options: EvalOptions,
        asked: &Limits,
        asked_timeout: bool,
    ) -> Result<EvalOptions, ServiceError> {
        if !asked_timeout {
            options.timeout = options.timeout.min(self.max_timeout);
        }
        if asked.memory.is_none() {
            options.memory = options.memory.map(|m| m.min(self.max_memory));
        }
        if asked.max_output.is_none() {
            options.max_output = options.max_output.min(self.max_output);
        }
        self.check(&options)?;
        Ok(options)
    }

    /// Refuse a timeout above the ceiling.
    pub fn check_timeout(&self, timeout: Duration) -> Result<(), ServiceError> {
        if timeout > self.max_timeout {
            return Err(above(format!("timeout above this server's cap of {} s", self.max_timeout.as_secs())));
        }
        Ok(())
    }

    /// Refuse options above the ceilings.
    pub fn check(&self, options: &EvalOptions) -> Result<(), ServiceError> {
        self.check_timeout(options.timeout)?;
        if options.memory.is_some_and(|m| m > self.max_memory) {
            return Err(above(format!("memory above this server's cap of {} MiB", self.max_memory >> 20)));
        }
        if options.cpu_seconds.is_some_and(|c| c > self.max_cpu) {
            return Err(above(format!("cpu above this server's cap of {} s", self.max_cpu)));
        }
        if options.max_output > self.max_output {
            return Err(above(format!("max_output above this server's cap of {} MiB", self.max_output >> 20)));
        }
        Ok(())
    }
}

fn above(message: String) -> ServiceError {
    ServiceError::new(ErrorCode::BadInput, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asked_above_a_ceiling_is_refused_and_defaults_are_brought_within() {
        let caps = Caps { max_output: 1 << 20, max_timeout: Duration::from_secs(10), ..Caps::default() };
        let asked = Limits { max_output: Some("2M".into()), ..Limits::default() };
        let options = asked.apply(EvalOptions::default()).unwrap();
        let refused = caps.bound(options, &asked, false).unwrap_err();
        assert_eq!(refused.code, ErrorCode::BadInput);
        assert!(refused.message.contains("max_output above this server's cap of 1 MiB"), "{}", refused.message);
        let bounded = caps.bound(EvalOptions::default(), &Limits::default(), false).unwrap();
        assert_eq!((bounded.max_output, bounded.timeout), (1 << 20, Duration::from_secs(10)));
        let long = EvalOptions { timeout: Duration::from_secs(11), ..EvalOptions::default() };
        assert_eq!(caps.bound(long, &Limits::default(), true).unwrap_err().code, ErrorCode::BadInput);
    }
}
