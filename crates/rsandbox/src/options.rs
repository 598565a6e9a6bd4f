//! What a caller can ask for per evaluation: its limits, checked, and the code's size.
//! Engine-wide settings are [`crate::config`]'s.

use crate::errors::InputError;
use rustix::process::Resource;
use std::time::Duration;

/// Largest code accepted (1 MiB).
pub const MAX_CODE_BYTES: usize = 1 << 20;

/// Limits for one evaluation. Serializable as plain data (a session carried to another
/// replica keeps its limits).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalOptions {
    /// Wall-clock deadline; the child and everything it started is killed at it.
    pub timeout: Duration,
    /// CPU seconds.
    pub cpu_seconds: Option<u64>,
    /// Memory the code may allocate, in bytes (address space beyond the zygote's).
    pub memory: Option<u64>,
    /// Largest file it may write.
    pub file_size: Option<u64>,
    /// Disk quota: the workspace is a private tmpfs of this size (needs namespaces).
    pub disk: Option<u64>,
    /// Processes it may run at once (itself included).
    pub processes: Option<u64>,
    /// Open files.
    pub open_files: Option<u64>,
    /// Bytes of stdout + stderr + result the supervisor accepts before killing it.
    pub max_output: u64,
    /// The hosts the sandbox may reach through the supervisor's proxy, within the
    /// engine's profile's `[network]` (a request narrows it, never widens it; an empty
    /// `allow`: no network). `None`: the profile's. Resolved by the engine
    /// ([`crate::Engine::network_for`]) before a sandbox is taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<crate::network::Network>,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            timeout: Duration::from_secs(30),
            cpu_seconds: None,
            memory: Some(2 << 30),
            file_size: Some(256 << 20),
            disk: Some(128 << 20),
            processes: Some(64),
            open_files: Some(256),
            max_output: 16 << 20,
            network: None,
        }
    }
}

/// Parse sizes like `512M`, `1.5G`, `2GiB`, `64k`, `1000` (bytes): the one size parser
/// of every front and of profiles. Binary units; a fraction rounds down to whole bytes.
pub fn parse_size(text: &str) -> Result<u64, InputError> {
    let bad = || InputError::BadLimit { what: "size".into(), value: text.to_string() };
    let t = text.trim();
    let (number, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len()));
    let unit = unit.trim_start();
    if number.is_empty() || number.matches('.').count() > 1 || number.starts_with('.') || number.ends_with('.') {
        return Err(bad());
    }
    let shift = match unit.to_ascii_uppercase().trim_end_matches(['B', 'I']) {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(bad()),
    };
    let value = match number.split_once('.') {
        None => number.parse::<u64>().map_err(|_| bad())?.checked_mul(1u64 << shift).ok_or_else(bad)?,
        Some(_) => {
            let exact = number.parse::<f64>().map_err(|_| bad())? * (1u64 << shift) as f64;
            if !exact.is_finite() || exact >= u64::MAX as f64 {
                return Err(bad());
            }
            exact as u64
        }
    };
    if value == 0 {
        return Err(bad());
    }
    Ok(value)
}

/// Check code before anything starts: non-empty, at most 1 MiB, no NUL bytes.
pub fn validate_code(code: &str) -> Result<(), InputError> {
    if code.trim().is_empty() {
        return Err(InputError::EmptyCode);
    }
    if code.len() > MAX_CODE_BYTES {
        return Err(InputError::CodeTooLarge { bytes: code.len(), max: MAX_CODE_BYTES });
    }
    if code.contains('\0') {
        return Err(InputError::NulInCode);
    }
    Ok(())
}

impl EvalOptions {
    /// Check the limits make sense.
    pub fn validate(&self) -> Result<(), InputError> {
        if self.timeout.is_zero() || self.timeout > Duration::from_secs(24 * 3600) {
            return Err(InputError::BadLimit { what: "timeout".into(), value: format!("{:?}", self.timeout) });
        }
        for (what, v) in [
            ("cpu", self.cpu_seconds),
            ("memory", self.memory),
            ("fsize", self.file_size),
            ("disk", self.disk),
            ("nproc", self.processes),
            ("nofile", self.open_files),
            ("max-output", Some(self.max_output)),
        ] {
            if v == Some(0) {
                return Err(InputError::BadLimit { what: what.into(), value: "0".into() });
            }
        }
        if let Some(network) = &self.network {
            network.policy().map_err(|e| InputError::BadLimit { what: "network".into(), value: e.to_string() })?;
        }
        if self.open_files.is_some_and(|n| n < 16) {
            return Err(InputError::BadLimit { what: "nofile".into(), value: "below 16 (R needs some)".into() });
        }
        // A sandbox cannot raise a limit above this process's hard limit: asking for more
        // is bad input, said before any fork (not a sandbox that fails to start).
        for (what, asked, resource) in [
            ("nofile", self.open_files, Resource::Nofile),
            ("nproc", self.processes, Resource::Nproc),
            ("cpu", self.cpu_seconds, Resource::Cpu),
            ("fsize", self.file_size, Resource::Fsize),
        ] {
            if let (Some(asked), Some(hard)) = (asked, hard_limit(resource)) {
                // CPU: the hard limit is set one above the soft one (SIGXCPU first).
                let needed = if resource == Resource::Cpu { asked.saturating_add(1) } else { asked };
                if needed > hard {
                    return Err(InputError::BadLimit {
                        what: what.into(),
                        value: format!("{asked}, above this system's hard limit of {hard}"),
                    });
                }
            }
        }
        Ok(())
    }
}

/// This process's hard limit for `resource` (`None`: unlimited or unknown), read once:
/// it is checked for every request (the default limits ask for three), and the engine
/// never changes its own limits. (Should the embedding program lower one later, a request
/// above it is refused by the sandbox's start instead of here.)
fn hard_limit(resource: Resource) -> Option<u64> {
    static HARD: std::sync::OnceLock<[(Resource, Option<u64>); 4]> = std::sync::OnceLock::new();
    let read = |resource| (resource, rustix::process::getrlimit(resource).maximum);
    let all = HARD.get_or_init(|| [Resource::Nofile, Resource::Nproc, Resource::Cpu, Resource::Fsize].map(read));
    all.iter().find(|(r, _)| *r == resource).map_or_else(|| read(resource).1, |(_, hard)| *hard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("64k").unwrap(), 64 << 10);
        assert_eq!(parse_size("10MiB").unwrap(), 10 << 20);
        assert_eq!(parse_size("1000").unwrap(), 1000);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_size("0.5 KiB").unwrap(), 512);
        for bad in ["", "M", "-1M", "12Q", "0", "99999999999999T", "1.2.3G", ".5G", "5.G", "0.0000001", "1e3M", "NaNM"]
        {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn code_is_checked_before_anything_runs() {
        assert!(matches!(validate_code("  \n"), Err(InputError::EmptyCode)));
        assert!(matches!(validate_code("a\0b"), Err(InputError::NulInCode)));
        let big = "x".repeat(MAX_CODE_BYTES + 1);
        assert!(matches!(validate_code(&big), Err(InputError::CodeTooLarge { .. })));
        validate_code("1 + 1").unwrap();
    }
}
