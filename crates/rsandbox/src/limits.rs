//! Limits as people write them: the one type behind a profile's `[limits]` table, the
//! `limits` object of every front's requests, and MCP's `new_session` arguments. Each
//! knob is optional (the engine's default, or the profile's, applies otherwise) and has
//! one name everywhere (`docs/protocol.md`, "Names"). [`Limits::apply`] turns it into
//! [`EvalOptions`]; sizes go through [`crate::parse_size`], durations through
//! [`parse_duration`] / [`timeout_secs`].

use crate::{parse_size, EvalOptions, InputError};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The longest timeout anything may ask for (a day).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);

/// Limits for an evaluation or a session, each optional.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Seconds of wall clock (a request's own `timeout` takes precedence). `timeout_s`
    /// is accepted too (MCP's earlier name).
    #[serde(alias = "timeout_s", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub timeout: Option<u64>,
    /// CPU seconds. `cpu_s` is accepted too (MCP's earlier name).
    #[serde(alias = "cpu_s", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub cpu: Option<u64>,
    /// Memory the code may allocate, e.g. "512M" or "1.5G".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Largest file, e.g. "16M".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsize: Option<String>,
    /// Disk quota of the workspace, e.g. "64M".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk: Option<String>,
    /// Processes at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub nproc: Option<u64>,
    /// Open files (R needs at least 16).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 16))]
    pub nofile: Option<u64>,
    /// Largest stdout + stderr + result, e.g. "1M".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output: Option<String>,
    /// The hosts this request may reach, within the server's network allowlist (its
    /// profile's `[network]`): a request may narrow it (`{"allow": ["cran.test"]}`; an
    /// empty `allow` turns the network off), never widen it. Absent: the server's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<crate::network::Network>,
}

impl Limits {
    /// `options` with these limits in place of its values (sizes parsed, nothing else
    /// checked: [`EvalOptions::validate`] does that).
    pub fn apply(&self, options: EvalOptions) -> Result<EvalOptions, InputError> {
        self.apply_named(options, str::to_string)
    }

    /// [`Limits::apply`], an error naming a knob as `name` words it (the CLI names
    /// `max_output` `--max-output`): each front says its own names, the rules are one.
    pub fn apply_named(
        &self,
        mut options: EvalOptions,
        name: impl Fn(&str) -> String,
    ) -> Result<EvalOptions, InputError> {
        let size = |what: &str, v: &Option<String>| {
            v.as_deref()
                .map(|text| {
                    parse_size(text).map_err(|_| InputError::BadLimit {
                        what: format!("{} (a size such as \"512M\")", name(what)),
                        value: text.to_string(),
                    })
                })
                .transpose()
        };
        if let Some(t) = self.timeout {
            options.timeout = timeout_secs(t as f64)?;
        }
        options.cpu_seconds = self.cpu.or(options.cpu_seconds);
        options.memory = size("memory", &self.memory)?.or(options.memory);
        options.file_size = size("fsize", &self.fsize)?.or(options.file_size);
        options.disk = size("disk", &self.disk)?.or(options.disk);
        options.processes = self.nproc.or(options.processes);
        options.open_files = self.nofile.or(options.open_files);
        options.max_output = size("max_output", &self.max_output)?.unwrap_or(options.max_output);
        if let Some(network) = &self.network {
            options.network = Some(network.clone());
        }
        Ok(options)
    }

    /// Whether these limits make sense on their own (a profile's, when it is loaded).
    pub fn check(&self) -> Result<(), InputError> {
        self.apply(EvalOptions::default())?.validate()
    }
}

/// A timeout given in seconds (a number): above 0 and at most [`MAX_TIMEOUT`], never
/// clamped. The one rule of every front; a server's lower cap is checked after it.
pub fn timeout_secs(seconds: f64) -> Result<Duration, InputError> {
    if seconds.is_finite() && seconds > 0.0 && seconds <= MAX_TIMEOUT.as_secs_f64() {
        return Ok(Duration::from_secs_f64(seconds));
    }
    Err(InputError::BadLimit {
        what: format!("timeout (seconds, above 0, at most {})", MAX_TIMEOUT.as_secs()),
        value: seconds.to_string(),
    })
}

/// A duration as text: seconds (`30`, `1.5`) or with a unit (`500ms`, `1.5s`, `2m`,
/// `1h`); within [`timeout_secs`]'s bounds. The one duration parser of flags and
/// settings.
pub fn parse_duration(text: &str) -> Result<Duration, InputError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => f64::NAN,
    };
    let seconds = number.parse::<f64>().map(|n| n * scale).unwrap_or(f64::NAN);
    timeout_secs(seconds).map_err(|_| InputError::BadLimit {
        what: format!("duration (such as 30, 1.5s, 500ms or 2m; at most {} s)", MAX_TIMEOUT.as_secs()),
        value: text.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_have_one_syntax_and_one_range() {
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        for bad in ["0", "-1", "2d", "", "s", "86401", "inf", "NaN"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(timeout_secs(86_400.5).is_err(), "refused above a day, not clamped");
        assert!(timeout_secs(0.0).is_err());
    }

    #[test]
    fn limits_overlay_options_and_keep_their_old_names() {
        let limits: Limits = serde_json::from_str(r#"{"cpu_s": 3, "memory": "1.5G", "timeout_s": 9}"#).unwrap();
        let o = limits.apply(EvalOptions::default()).unwrap();
        assert_eq!((o.cpu_seconds, o.memory, o.timeout), (Some(3), Some(3 << 29), Duration::from_secs(9)));
        assert_eq!(o.open_files, EvalOptions::default().open_files, "unset knobs keep the defaults");
        let bad = Limits { memory: Some("12Q".into()), ..Limits::default() };
        assert!(bad.apply(EvalOptions::default()).is_err());
        assert!(Limits { nofile: Some(8), ..Limits::default() }.check().is_err());
        assert!(serde_json::from_str::<Limits>(r#"{"cpu_seconds": 1}"#).is_err(), "unknown names are refused");
    }
}
