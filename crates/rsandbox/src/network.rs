//! The network allowlist as people write it: a profile's `[network]` table, the
//! `network` object of a request on every front, and `--network-allow`. One type
//! ([`Network`]), checked once ([`Network::policy`]) into the proxy's
//! [`egress::NetworkPolicy`]; a request's allowlist may only narrow the server's
//! ([`Network::narrowed`]).
//!
//! ```toml
//! [network]
//! allow = ["cloud.r-project.org", "*.r-universe.dev", "api.example.com:8443"]
//! hosts = { "cran.test" = "198.51.100.2" }   # addresses for names (still checked)
//! max_download = "64M"                        # per request, over all connections
//! max_upload = "16M"
//! max_connections = 256                       # per request
//! max_concurrent = 16                         # at once
//! connect_timeout = 10                        # seconds
//! idle_timeout = 30                           # seconds
//! ```

use crate::errors::InputError;
use crate::options::parse_size;
use egress::{AllowRule, NetworkPolicy};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

/// A network allowlist and its caps, as written (sizes as "64M", times in seconds).
/// Empty `allow`: no network at all (no socket can be made).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Host patterns the sandbox may reach: `cloud.r-project.org`, `*.r-universe.dev`,
    /// `api.example.com:8443` (port 443 unless given). Names only, never addresses.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Addresses for names, used instead of DNS (each still checked: never loopback,
    /// link-local, private). A profile's only: a request may not set them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hosts: BTreeMap<String, HostAddresses>,
    /// Bytes the sandbox may receive per request, e.g. "64M" (default 256M).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_download: Option<String>,
    /// Bytes the sandbox may send per request, e.g. "1M" (default 16M).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_upload: Option<String>,
    /// Connections per request (default 256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_connections: Option<u32>,
    /// Connections open at once (default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_concurrent: Option<u32>,
    /// Seconds to connect upstream (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub connect_timeout: Option<u64>,
    /// Seconds of upstream silence that end a connection (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub idle_timeout: Option<u64>,
    /// Whose list `allow` is (a profile's, a token's, a request's), as the proxy's denials
    /// name it. Set by whoever narrows; never read from a request.
    #[serde(skip)]
    #[schemars(skip)]
    pub list: egress::Allowlist,
}

/// One address or several, for a name of `hosts`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum HostAddresses {
    /// `"198.51.100.2"`
    One(String),
    /// `["198.51.100.2", "2001:db8::2"]`
    Several(Vec<String>),
}

impl HostAddresses {
    fn strings(&self) -> &[String] {
        match self {
            HostAddresses::One(one) => std::slice::from_ref(one),
            HostAddresses::Several(all) => all,
        }
    }
}

/// The refusal of a network allowlist where sandboxes get no network namespace: the
/// sandbox would share the host's network.
pub fn needs_namespaces() -> InputError {
    bad("the network allowlist needs a network namespace of the sandbox's own, and --no-namespaces runs without one: \
         drop --no-namespaces (or use a host that allows namespaces), or run without [network] / --network-allow"
        .into())
}

fn bad(message: String) -> InputError {
    InputError::BadNetwork { message }
}

impl Network {
    /// Whether it lets anything through (an empty allowlist is no network).
    pub fn is_on(&self) -> bool {
        !self.allow.is_empty()
    }

    /// The proxy's policy: every entry checked, in the user's words
    /// ("network.allow entry \"10.0.0.1\": …", "network.max_download = \"lots\" …").
    pub fn policy(&self) -> Result<NetworkPolicy, InputError> {
        let allow = self.rules()?;
        let mut hosts = BTreeMap::new();
        for (name, addresses) in &self.hosts {
            let parsed: Result<Vec<IpAddr>, _> = addresses.strings().iter().map(|a| a.trim().parse()).collect();
            let parsed = parsed.map_err(|_| {
                bad(format!(
                    "network.hosts.{name:?} = {:?} is not an IP address (or a list of them)",
                    addresses.strings()
                ))
            })?;
            hosts.insert(name.clone(), parsed);
        }
        let size = |key: &str, value: &Option<String>, default: u64| match value {
            None => Ok(default),
            Some(text) => {
                parse_size(text).map_err(|_| bad(format!("network.{key} = {text:?} is not a size such as \"64M\"")))
            }
        };
        let seconds = |value: Option<u64>, default: Duration| value.map_or(default, Duration::from_secs);
        let defaults = NetworkPolicy::default();
        let policy = NetworkPolicy {
            allow,
            hosts,
            max_bytes_in: size("max_download", &self.max_download, defaults.max_bytes_in)?,
            max_bytes_out: size("max_upload", &self.max_upload, defaults.max_bytes_out)?,
            max_connections: self.max_connections.unwrap_or(defaults.max_connections),
            max_concurrent: self.max_concurrent.unwrap_or(defaults.max_concurrent),
            connect_timeout: seconds(self.connect_timeout, defaults.connect_timeout),
            idle_timeout: seconds(self.idle_timeout, defaults.idle_timeout),
            allowlist: self.list,
        };
        policy.validate().map_err(|e| bad(e.to_string()))?;
        Ok(policy)
    }

    fn rules(&self) -> Result<Vec<AllowRule>, InputError> {
        self.allow.iter().map(|entry| entry.parse::<AllowRule>().map_err(|e| bad(e.to_string()))).collect()
    }

    /// The first entry of `allow` that this allowlist does not cover (`None`: all are
    /// covered). An entry is covered by a rule of the same port whose name is the same,
    /// or a wildcard over it; a wildcard entry only by a wildcard as wide or wider. A
    /// malformed entry (of either list) is an error naming it.
    pub fn first_outside<'a>(&self, allow: &'a [String]) -> Result<Option<&'a str>, InputError> {
        let ceiling = self.rules()?;
        for entry in allow {
            let rule: AllowRule = entry.parse().map_err(|e: egress::RuleError| bad(e.to_string()))?;
            let covered = ceiling.iter().any(|c| {
                let name_covered = if rule.is_wildcard() {
                    // `*.a.b` under `*.a.b` or `*.b`; never under a plain name.
                    c.is_wildcard() && (c.name() == rule.name() || c.matches_name(rule.name()))
                } else {
                    c.matches_name(rule.name())
                };
                c.port() == rule.port() && name_covered
            });
            if !covered {
                return Ok(Some(entry));
            }
        }
        Ok(None)
    }

    /// The allow entries as a message shows them: comma-separated, or "(none)".
    pub fn allow_list(&self) -> String {
        if self.allow.is_empty() {
            "(none)".to_string()
        } else {
            self.allow.join(", ")
        }
    }

    /// This (the server's ceiling) narrowed to a request's `allow`: every entry the
    /// request names must be covered by a ceiling rule (same port; the same name, or a
    /// name a ceiling wildcard covers), else bad input naming it. The ceiling's hosts
    /// and caps stay; a request that names no host turns the network off.
    pub fn narrowed(&self, request: &Network) -> Result<Network, InputError> {
        // A request may repeat the operator's addresses (a resolved allowlist does),
        // never set its own.
        if !request.hosts.is_empty() && request.hosts != self.hosts {
            return Err(bad("network.hosts is the operator's (a profile's), not a request's".into()));
        }
        if let Some(entry) = self.first_outside(&request.allow)? {
            return Err(bad(format!(
                "network.allow entry {entry:?} is outside this server's network allowlist ({}): a request may narrow it, never widen it",
                self.allow_list()
            )));
        }
        let tighter = |asked: &Option<String>, ceiling: &Option<String>| -> Result<Option<String>, InputError> {
            match (asked, ceiling) {
                (Some(a), Some(c)) if parse_size(a).ok() > parse_size(c).ok() => Ok(Some(c.clone())),
                (Some(a), _) => Ok(Some(a.clone())),
                (None, c) => Ok(c.clone()),
            }
        };
        let least = |a: Option<u32>, c: Option<u32>| match (a, c) {
            (Some(a), Some(c)) => Some(a.min(c)),
            (a, c) => a.or(c),
        };
        let least64 = |a: Option<u64>, c: Option<u64>| match (a, c) {
            (Some(a), Some(c)) => Some(a.min(c)),
            (a, c) => a.or(c),
        };
        let narrowed = Network {
            allow: request.allow.clone(),
            hosts: self.hosts.clone(),
            max_download: tighter(&request.max_download, &self.max_download)?,
            max_upload: tighter(&request.max_upload, &self.max_upload)?,
            max_connections: least(request.max_connections, self.max_connections),
            max_concurrent: least(request.max_concurrent, self.max_concurrent),
            connect_timeout: least64(request.connect_timeout, self.connect_timeout),
            idle_timeout: least64(request.idle_timeout, self.idle_timeout),
            // Whose list refuses: one a front or an earlier narrowing marked stays so (a
            // token's; resolving again changes nothing); the profile's own list is the
            // profile's; any other the request asked for.
            list: match request.list {
                egress::Allowlist::Profile if request.allow == self.allow => egress::Allowlist::Profile,
                egress::Allowlist::Profile => egress::Allowlist::Request,
                marked => marked,
            },
        };
        narrowed.policy()?;
        Ok(narrowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn network(allow: &[&str]) -> Network {
        Network { allow: allow.iter().map(|s| s.to_string()).collect(), ..Network::default() }
    }

    #[test]
    fn entries_are_checked_in_the_users_words() {
        let mut n = network(&["cran.test"]);
        n.hosts.insert("cran.test".into(), HostAddresses::One("198.51.100.2".into()));
        n.max_download = Some("64M".into());
        let p = n.policy().unwrap();
        assert_eq!(p.max_bytes_in, 64 << 20);
        assert_eq!(p.hosts["cran.test"], vec!["198.51.100.2".parse::<IpAddr>().unwrap()]);
        let error = network(&["10.0.0.1"]).policy().unwrap_err().to_string();
        assert!(error.contains("10.0.0.1"), "{error}");
        let mut n = network(&["cran.test"]);
        n.max_download = Some("lots".into());
        assert!(n.policy().unwrap_err().to_string().contains("network.max_download"));
        n.max_download = None;
        n.hosts.insert("cran.test".into(), HostAddresses::One("nowhere".into()));
        assert!(n.policy().unwrap_err().to_string().contains("network.hosts"));
    }

    #[test]
    fn a_denial_names_whose_list_refused_the_host() {
        let ceiling = network(&["a.test", "b.test"]);
        let denial = |n: &Network| n.policy().unwrap().check_host("b.test", 443).map(drop).unwrap_err().to_string();
        assert_eq!(denial(&network(&["c.test"])), "b.test:443 is not in this profile's network.allow");
        let asked = ceiling.narrowed(&network(&["a.test"])).unwrap();
        assert_eq!(denial(&asked), "b.test:443 is not in this request's network.allow");
        // Resolving again (the engine does) changes nothing; the profile's own list is the profile's.
        assert_eq!(ceiling.narrowed(&asked).unwrap(), asked);
        let same = ceiling.narrowed(&ceiling).unwrap();
        assert_eq!(
            (same.list, ceiling.narrowed(&same).unwrap().list),
            (egress::Allowlist::Profile, egress::Allowlist::Profile)
        );
        // A token's list (the fronts mark it) stays the token's through the profile's narrowing.
        let token = Network { list: egress::Allowlist::Token, ..network(&["a.test"]) };
        let by_token = ceiling.narrowed(&token).unwrap();
        assert!(
            denial(&by_token).starts_with("b.test:443 is not in this token's network.allow"),
            "{}",
            denial(&by_token)
        );
    }

    #[test]
    fn a_request_narrows_never_widens() {
        let ceiling = network(&["cloud.r-project.org", "*.r-universe.dev", "api.example.com:8443"]);
        let ok = ceiling.narrowed(&network(&["cloud.r-project.org", "glue.r-universe.dev"])).unwrap();
        assert_eq!(ok.allow, vec!["cloud.r-project.org", "glue.r-universe.dev"]);
        ceiling.narrowed(&network(&["*.r-universe.dev", "api.example.com:8443"])).unwrap();
        for wider in ["example.org", "api.example.com", "cloud.r-project.org:80", "*.r-project.org", "r-universe.dev"] {
            let error = ceiling.narrowed(&network(&[wider])).unwrap_err().to_string();
            assert!(error.contains(wider) && error.contains("never widen"), "{wider}: {error}");
        }
        assert!(!ceiling.narrowed(&network(&[])).unwrap().is_on(), "no host: no network");
        let mut caps = network(&["cloud.r-project.org"]);
        caps.max_download = Some("1G".into());
        let mut small = ceiling.clone();
        small.max_download = Some("64M".into());
        assert_eq!(small.narrowed(&caps).unwrap().max_download.as_deref(), Some("64M"));
    }
}
