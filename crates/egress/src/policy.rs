//! The policy: which names and ports the sandbox may reach, the operator's address
//! overrides, and the caps. Pure data and pure decisions (no sockets), so `learn` and the
//! profile loader use the same rules as the proxy.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;

/// Port of a rule that names none: HTTPS.
pub const DEFAULT_PORT: u16 = 443;

/// One `network.allow` entry: `cloud.r-project.org`, `*.r-universe.dev` (one or more
/// labels in place of the `*`, never none), `api.example.com:8443`. Port 443 unless given.
/// Names only: an IP address is refused when the rule is parsed, so an allowlist can never
/// open an address range.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AllowRule {
    /// The name, lower case, without a trailing dot; for a wildcard the part after `*.`.
    name: String,
    wildcard: bool,
    port: u16,
    /// Whether the rule was written with its port (so `Display` gives back what was written).
    port_written: bool,
}

/// Why a `network.allow` entry or a `network.hosts` name is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("network.allow entry {entry:?}: {why}")]
pub struct RuleError {
    /// The entry as written.
    pub entry: String,
    /// What is wrong with it, in words.
    pub why: String,
}

impl AllowRule {
    /// The name (for a wildcard, the part after `*.`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the rule is `*.name`.
    pub fn is_wildcard(&self) -> bool {
        self.wildcard
    }

    /// The port it allows.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether `host` (already normalised by [`normalize_host`]) is this rule's name.
    pub fn matches_name(&self, host: &str) -> bool {
        if self.wildcard {
            host.len() > self.name.len() + 1
                && host.ends_with(self.name.as_str())
                && host.as_bytes()[host.len() - self.name.len() - 1] == b'.'
        } else {
            host == self.name
        }
    }
}

impl AllowRule {
    /// Whether everything `other` allows, this rule allows too: the same port, and
    /// `other`'s name is this one's (or under this wildcard); a wildcard is covered only
    /// by a wildcard of the same or a wider domain. How a request's allowlist is checked
    /// to narrow, never widen, an operator's.
    pub fn covers(&self, other: &AllowRule) -> bool {
        let name_covered = if other.wildcard {
            self.wildcard && (self.name == other.name || self.matches_name(&other.name))
        } else {
            self.matches_name(&other.name)
        };
        self.port == other.port && name_covered
    }
}

impl FromStr for AllowRule {
    type Err = RuleError;

    fn from_str(entry: &str) -> Result<Self, RuleError> {
        let refuse = |why: &str| RuleError { entry: entry.to_string(), why: why.to_string() };
        let text = entry.trim();
        if text.contains("://") || text.contains('/') {
            return Err(refuse("write a host name with an optional port, without a scheme or path (\"cloud.r-project.org\", \"api.example.com:8443\")"));
        }
        if text.starts_with('[') || text.matches(':').count() > 1 {
            return Err(refuse("IP addresses are not accepted; the allowlist names hosts"));
        }
        let (host, port, port_written) = match text.rsplit_once(':') {
            Some((host, port)) => {
                let port = match port.parse::<u32>() {
                    Ok(p) if (1..=65535).contains(&p) => p as u16,
                    _ => return Err(refuse("the port must be a number from 1 to 65535")),
                };
                (host, port, true)
            }
            None => (text, DEFAULT_PORT, false),
        };
        let (wildcard, name) = match host.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host),
        };
        if name.contains('*') {
            return Err(refuse("a wildcard may only be a leading \"*.\" (\"*.r-universe.dev\")"));
        }
        let name = normalize_host(name).map_err(|e| refuse(&e.to_string()))?;
        Ok(AllowRule { name, wildcard, port, port_written })
    }
}

impl fmt::Display for AllowRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.wildcard {
            f.write_str("*.")?;
        }
        f.write_str(&self.name)?;
        if self.port_written {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

impl TryFrom<String> for AllowRule {
    type Error = RuleError;
    fn try_from(s: String) -> Result<Self, RuleError> {
        s.parse()
    }
}

impl From<AllowRule> for String {
    fn from(rule: AllowRule) -> String {
        rule.to_string()
    }
}

/// Why a host name is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// Empty, or an empty label (`a..b`, `.a`).
    #[error("it has an empty label")]
    EmptyLabel,
    /// Not ASCII: internationalised names are written in their `xn--` form.
    #[error("it is not ASCII (write an internationalised name in its xn-- form)")]
    NotAscii,
    /// A character that no host name has.
    #[error("{0:?} is not allowed in a host name (letters, digits, '-', '_' and '.')")]
    BadCharacter(char),
    /// Longer than DNS allows.
    #[error("it is longer than DNS allows (63 characters a label, 253 in all)")]
    TooLong,
    /// An IPv4 address in any of the forms `inet_aton` reads (dotted, `2130706433`,
    /// `0177.0.0.1`, `0x7f.1`) or an IPv6 address.
    #[error("it is an IP address; the allowlist names hosts")]
    IpLiteral,
}

/// The one spelling of a host name that rules and requests are compared in: ASCII, lower
/// case, without its trailing dot. IP literals are refused in every form a resolver
/// accepts: a name whose last label is a number (decimal, octal or `0x` hex) is one, as no
/// top-level domain is numeric.
pub fn normalize_host(raw: &str) -> Result<String, HostError> {
    if !raw.is_ascii() {
        return Err(HostError::NotAscii);
    }
    if raw.starts_with('[') || raw.contains(':') {
        return Err(HostError::IpLiteral);
    }
    let name = raw.strip_suffix('.').unwrap_or(raw).to_ascii_lowercase();
    if name.len() > 253 {
        return Err(HostError::TooLong);
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(HostError::EmptyLabel);
        }
        if label.len() > 63 {
            return Err(HostError::TooLong);
        }
        if let Some(c) = label.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_')) {
            return Err(HostError::BadCharacter(c));
        }
    }
    let last = name.rsplit('.').next().unwrap_or_default();
    let hex = last.strip_prefix("0x").is_some_and(|h| h.chars().all(|c| c.is_ascii_hexdigit()));
    if hex || last.chars().all(|c| c.is_ascii_digit()) {
        return Err(HostError::IpLiteral);
    }
    Ok(name)
}

/// Whose allowlist a policy is, named in its denials so that the R user looks in the
/// right place: the profile's `[network]`, or a narrower list a server's token file or a
/// request gave.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Allowlist {
    /// A profile's `[network] allow` (and `--network-allow`).
    #[default]
    Profile,
    /// A token's `network=` in the server's token file.
    Token,
    /// A request's `limits.network.allow`.
    Request,
}

impl fmt::Display for Allowlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Allowlist::Profile => "this profile's network.allow",
            Allowlist::Token => "this token's network.allow (network= of the server's token file)",
            Allowlist::Request => "this request's network.allow",
        })
    }
}

/// Why a connection is refused by the policy, in the R user's words: the first line of
/// the 403 the proxy answers, the `reason` of its record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Denial {
    /// No rule names the host.
    #[error("{host}:{port} is not in {list}")]
    NotAllowed {
        /// The host as asked for.
        host: String,
        /// The port asked for.
        port: u16,
        /// Whose list.
        list: Allowlist,
    },
    /// A rule names the host, on other ports.
    #[error("{host}:{port} is not in {list} (it allows {host} on port {allowed} only)")]
    PortNotAllowed {
        /// The host as asked for.
        host: String,
        /// The port asked for.
        port: u16,
        /// The ports the rules give this host, as "443" or "443, 8443".
        allowed: String,
        /// Whose list.
        list: Allowlist,
    },
    /// The target is an IP address (any form) or not a host name at all.
    #[error("{host}:{port} is not in {list} ({why})")]
    NotAName {
        /// The host as asked for (printable ASCII, truncated).
        host: String,
        /// The port asked for.
        port: u16,
        /// Why it is not a name.
        why: HostError,
        /// Whose list.
        list: Allowlist,
    },
    /// The name resolves to an address the sandbox may never reach.
    #[error("{host} resolves to {address}, {kind}, which the sandbox may not reach")]
    ForbiddenAddress {
        /// The host.
        host: String,
        /// The first forbidden address among those it resolved to.
        address: IpAddr,
        /// What kind of address it is ("a loopback address").
        kind: &'static str,
    },
    /// The name does not resolve.
    #[error("{host} could not be resolved ({error})")]
    Unresolved {
        /// The host.
        host: String,
        /// The resolver's words.
        error: String,
    },
    /// The TLS ClientHello names another server, or none (domain fronting).
    #[error("SNI {sni} does not match CONNECT {host}")]
    SniMismatch {
        /// The server name of the ClientHello, or "(none)".
        sni: String,
        /// The CONNECT host.
        host: String,
    },
    /// The first bytes after CONNECT are not a TLS ClientHello.
    #[error("the bytes sent after CONNECT {host}:{port} are not a TLS ClientHello (plain HTTP goes through the proxy as http://, not CONNECT)")]
    NotTls {
        /// The CONNECT host.
        host: String,
        /// The CONNECT port.
        port: u16,
    },
    /// A plain-HTTP request whose `Host` header names another server than its target.
    #[error("Host header {header} does not match the request's target {host}")]
    HostHeaderMismatch {
        /// The header's value, or "(none)".
        header: String,
        /// The target host.
        host: String,
    },
}

/// Defaults of [`NetworkPolicy`]'s caps.
pub mod defaults {
    use std::time::Duration;
    /// Bytes received from upstream per request.
    pub const MAX_BYTES_IN: u64 = 256 << 20;
    /// Bytes sent upstream per request.
    pub const MAX_BYTES_OUT: u64 = 16 << 20;
    /// Connections per request.
    pub const MAX_CONNECTIONS: u32 = 256;
    /// Connections open at once.
    pub const MAX_CONCURRENT: u32 = 16;
    /// Time to connect upstream.
    pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
    /// Upstream silence that ends a connection.
    pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
}

/// What one sandbox may reach, and how much. Serializable as plain data (durations in
/// seconds); missing fields take the defaults of [`defaults`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkPolicy {
    /// Host patterns: `cloud.r-project.org`, `*.r-universe.dev`, `api.example.com:8443`.
    #[schemars(with = "Vec<String>")]
    pub allow: Vec<AllowRule>,
    /// The operator's addresses for names (like curl's `--resolve` or docker's
    /// `--add-host`): used instead of DNS for that name, and still subject to every
    /// address check.
    pub hosts: BTreeMap<String, Vec<IpAddr>>,
    /// Bytes the sandbox may receive per request, over all its connections.
    pub max_bytes_in: u64,
    /// Bytes the sandbox may send per request, over all its connections.
    pub max_bytes_out: u64,
    /// Connections per request; those beyond are refused (and summarised in one record).
    pub max_connections: u32,
    /// Connections open at once; more are refused, not queued.
    pub max_concurrent: u32,
    /// Time to connect upstream, in seconds.
    #[serde(with = "seconds")]
    #[schemars(with = "f64")]
    pub connect_timeout: Duration,
    /// An upstream silent this long (seconds) is disconnected.
    #[serde(with = "seconds")]
    #[schemars(with = "f64")]
    pub idle_timeout: Duration,
    /// Whose list `allow` is, as its denials name it.
    pub allowlist: Allowlist,
}

impl Default for NetworkPolicy {
    fn default() -> Self {
        NetworkPolicy {
            allow: Vec::new(),
            hosts: BTreeMap::new(),
            max_bytes_in: defaults::MAX_BYTES_IN,
            max_bytes_out: defaults::MAX_BYTES_OUT,
            max_connections: defaults::MAX_CONNECTIONS,
            max_concurrent: defaults::MAX_CONCURRENT,
            connect_timeout: defaults::CONNECT_TIMEOUT,
            idle_timeout: defaults::IDLE_TIMEOUT,
            allowlist: Allowlist::Profile,
        }
    }
}

/// Why a policy cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A `network.hosts` name is not a host name.
    #[error("network.hosts entry {name:?}: {why}")]
    BadHostsName {
        /// The name as written.
        name: String,
        /// Why.
        why: HostError,
    },
    /// A `network.hosts` name has no address.
    #[error("network.hosts entry {0:?} has no address")]
    NoAddress(String),
    /// A cap of zero (or a zero timeout) would refuse everything; say so rather than
    /// accept a policy that silently can't work.
    #[error("network.{0} must be above 0")]
    Zero(&'static str),
}

impl NetworkPolicy {
    /// A policy allowing these rules, with the default caps.
    pub fn allowing(allow: impl IntoIterator<Item = AllowRule>) -> NetworkPolicy {
        NetworkPolicy { allow: allow.into_iter().collect(), ..NetworkPolicy::default() }
    }

    /// Whether the policy makes sense: `hosts` names are names with addresses, caps are
    /// above zero. (Rules are checked when parsed.)
    pub fn validate(&self) -> Result<(), PolicyError> {
        for (name, addresses) in &self.hosts {
            normalize_host(name).map_err(|why| PolicyError::BadHostsName { name: name.clone(), why })?;
            if addresses.is_empty() {
                return Err(PolicyError::NoAddress(name.clone()));
            }
        }
        let zero = [
            ("max_bytes_in", self.max_bytes_in == 0),
            ("max_bytes_out", self.max_bytes_out == 0),
            ("max_connections", self.max_connections == 0),
            ("max_concurrent", self.max_concurrent == 0),
            ("connect_timeout", self.connect_timeout.is_zero()),
            ("idle_timeout", self.idle_timeout.is_zero()),
        ];
        match zero.iter().find(|(_, is_zero)| *is_zero) {
            Some((what, _)) => Err(PolicyError::Zero(what)),
            None => Ok(()),
        }
    }

    /// The policy's decision on a name and port, before any resolution: the rule that
    /// allows it, or why not. `host` may be as a client wrote it (any case, a trailing
    /// dot); IP literals are refused in every form.
    pub fn check_host(&self, host: &str, port: u16) -> Result<&AllowRule, Denial> {
        let list = self.allowlist;
        let name =
            normalize_host(host).map_err(|why| Denial::NotAName { host: printable(host, 255), port, why, list })?;
        let named: Vec<&AllowRule> = self.allow.iter().filter(|rule| rule.matches_name(&name)).collect();
        if let Some(rule) = named.iter().find(|rule| rule.port == port) {
            return Ok(rule);
        }
        if named.is_empty() {
            return Err(Denial::NotAllowed { host: name, port, list });
        }
        let mut ports: Vec<u16> = named.iter().map(|rule| rule.port).collect();
        ports.sort_unstable();
        ports.dedup();
        let allowed = ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ");
        Err(Denial::PortNotAllowed { host: name, port, allowed, list })
    }

    /// The operator's addresses for `name` (normalised), if `hosts` has it.
    pub fn host_override(&self, name: &str) -> Option<&[IpAddr]> {
        self.hosts.iter().find(|(key, _)| normalize_host(key).is_ok_and(|k| k == name)).map(|(_, v)| v.as_slice())
    }
}

/// `text` with anything but printable ASCII replaced by `?`, cut to `max` characters: a
/// client's bytes made safe for a header, a log line and an R error.
pub fn printable(text: &str, max: usize) -> String {
    let mut out: String =
        text.chars().take(max).map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).collect();
    if text.chars().count() > max {
        out.push_str("...");
    }
    out
}

/// Durations as seconds (a number), as every other duration of a profile.
mod seconds {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(value.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let seconds = f64::deserialize(deserializer)?;
        Duration::try_from_secs_f64(seconds).map_err(|_| {
            serde::de::Error::custom(format!("{seconds} is not a duration in seconds (a number, 0 or more)"))
        })
    }
}
