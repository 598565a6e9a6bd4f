//! The policy as data: rules as written, what they match, the words of each refusal, and
//! the policy's serialized form. No sockets.

use egress::{AllowRule, Denial, NetworkPolicy};
use std::time::Duration;

fn rule(text: &str) -> AllowRule {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn refused(text: &str) -> String {
    text.parse::<AllowRule>().expect_err(text).to_string()
}

#[test]
fn rules_are_names_with_a_port_443_unless_given() {
    let plain = rule("Cloud.R-Project.org.");
    assert_eq!((plain.name(), plain.port(), plain.is_wildcard()), ("cloud.r-project.org", 443, false));
    assert_eq!(plain.to_string(), "cloud.r-project.org");
    let wild = rule("*.r-universe.dev");
    assert_eq!((wild.name(), wild.port(), wild.is_wildcard()), ("r-universe.dev", 443, true));
    assert_eq!(wild.to_string(), "*.r-universe.dev");
    let ported = rule("api.example.com:8443");
    assert_eq!((ported.port(), ported.to_string().as_str()), (8443, "api.example.com:8443"));
    assert_eq!(rule("api.example.com:443").to_string(), "api.example.com:443");
}

#[test]
fn rules_refuse_addresses_bad_names_wildcards_and_ports_in_words() {
    for (text, words) in [
        ("10.0.0.1", "IP address"),
        ("127.0.0.1:443", "IP address"),
        ("2130706433", "IP address"),
        ("0177.0.0.1", "IP address"),
        ("0x7f.0.0.1", "IP address"),
        ("[::1]:443", "IP address"),
        ("::ffff:127.0.0.1", "IP address"),
        ("a..example.com", "empty label"),
        (".example.com", "empty label"),
        ("", "empty label"),
        ("*", "wildcard"),
        ("*example.com", "wildcard"),
        ("a.*.example.com", "wildcard"),
        ("*.*.example.com", "wildcard"),
        ("example.com:0", "port"),
        ("example.com:65536", "port"),
        ("example.com:", "port"),
        ("example.com:http", "port"),
        ("https://example.com", "without a scheme"),
        ("example.com/path", "without a scheme"),
        ("bücher.example", "xn--"),
        ("exa mple.com", "not allowed in a host name"),
    ] {
        let message = refused(text);
        assert!(message.contains(words), "{text:?}: {message}");
        assert!(message.starts_with(&format!("network.allow entry {text:?}")), "{message}");
    }
}

#[test]
fn check_host_matches_names_case_and_trailing_dot_insensitively() {
    let policy = NetworkPolicy::allowing(
        ["cloud.r-project.org", "*.r-universe.dev", "api.example.com:8443"].map(|r| r.parse().unwrap()),
    );
    assert_eq!(policy.check_host("CLOUD.r-project.ORG.", 443).unwrap().to_string(), "cloud.r-project.org");
    assert_eq!(policy.check_host("cran.r-universe.dev", 443).unwrap().to_string(), "*.r-universe.dev");
    assert_eq!(policy.check_host("a.b.r-universe.dev", 443).unwrap().to_string(), "*.r-universe.dev");
    assert_eq!(policy.check_host("api.example.com", 8443).unwrap().port(), 8443);

    let denied = |host: &str, port: u16| policy.check_host(host, port).unwrap_err();
    assert_eq!(denied("r-universe.dev", 443).to_string(), "r-universe.dev:443 is not in this profile's network.allow");
    assert_eq!(
        denied("evilr-universe.dev", 443).to_string(),
        "evilr-universe.dev:443 is not in this profile's network.allow"
    );
    assert_eq!(denied("api.other.com", 443).to_string(), "api.other.com:443 is not in this profile's network.allow");
    assert_eq!(
        denied("cloud.r-project.org", 22).to_string(),
        "cloud.r-project.org:22 is not in this profile's network.allow (it allows cloud.r-project.org on port 443 only)"
    );
    assert!(matches!(denied("api.example.com", 443), Denial::PortNotAllowed { .. }));
    for literal in ["127.0.0.1", "2130706433", "0177.0.0.1", "0x7f.1", "[::ffff:127.0.0.1]", "::1", "127.1"] {
        let denial = denied(literal, 443);
        assert!(matches!(denial, Denial::NotAName { .. }), "{literal}: {denial:?}");
        let words = denial.to_string();
        assert!(
            words.starts_with(&format!("{literal}:443 is not in this profile's network.allow (it is an IP address")),
            "{words}"
        );
    }
    assert!(matches!(denied("clöud.r-project.org", 443), Denial::NotAName { .. }));
}

#[test]
fn a_rule_covers_what_it_allows_and_no_more() {
    let covers = |ceiling: &str, asked: &str| rule(ceiling).covers(&rule(asked));
    assert!(covers("cloud.r-project.org", "CLOUD.r-project.org."));
    assert!(covers("*.r-universe.dev", "cran.r-universe.dev"));
    assert!(covers("*.r-universe.dev", "*.r-universe.dev"));
    assert!(covers("*.dev", "*.r-universe.dev"));
    assert!(covers("api.example.com:8443", "api.example.com:8443"));
    assert!(!covers("*.r-universe.dev", "r-universe.dev"), "a wildcard never covers its bare domain");
    assert!(!covers("cran.r-universe.dev", "*.r-universe.dev"), "a name never covers a wildcard");
    assert!(!covers("*.cran.r-universe.dev", "*.r-universe.dev"));
    assert!(!covers("api.example.com", "api.example.com:8443"), "ports must be the same");
    assert!(!covers("example.com", "api.example.com"));
}

#[test]
fn policy_serializes_rules_as_strings_and_durations_as_seconds() {
    let json = serde_json::json!({
        "allow": ["cloud.r-project.org", "*.r-universe.dev", "api.example.com:8443"],
        "hosts": {"repo.test": ["198.51.100.2"]},
        "max_bytes_in": 67108864,
        "connect_timeout": 2.5
    });
    let policy: NetworkPolicy = serde_json::from_value(json).unwrap();
    assert_eq!(policy.allow[1].to_string(), "*.r-universe.dev");
    assert_eq!(policy.hosts["repo.test"], vec!["198.51.100.2".parse::<std::net::IpAddr>().unwrap()]);
    assert_eq!(policy.max_bytes_in, 64 << 20);
    assert_eq!(policy.connect_timeout, Duration::from_millis(2500));
    assert_eq!(policy.idle_timeout, Duration::from_secs(30), "a missing field takes its default");
    let back = serde_json::to_value(&policy).unwrap();
    assert_eq!(back["allow"][2], "api.example.com:8443");
    assert_eq!(back["idle_timeout"], 30.0);

    let bad = serde_json::from_value::<NetworkPolicy>(serde_json::json!({"allow": ["10.0.0.1"]})).unwrap_err();
    assert!(bad.to_string().contains("IP address"), "{bad}");
    let unknown = serde_json::from_value::<NetworkPolicy>(serde_json::json!({"alow": []})).unwrap_err();
    assert!(unknown.to_string().contains("alow"), "{unknown}");

    let schema = serde_json::to_value(schemars::schema_for!(NetworkPolicy)).unwrap();
    assert_eq!(schema["properties"]["allow"]["items"]["type"], "string", "{schema}");
    assert_eq!(schema["properties"]["connect_timeout"]["type"], "number");
}

#[test]
fn validate_refuses_what_cannot_work() {
    let mut policy = NetworkPolicy::default();
    assert!(policy.validate().is_ok());
    policy.hosts.insert("127.0.0.1".into(), vec!["198.51.100.2".parse().unwrap()]);
    assert!(policy.validate().unwrap_err().to_string().contains("network.hosts entry \"127.0.0.1\""));
    policy.hosts.clear();
    policy.hosts.insert("repo.test".into(), vec![]);
    assert_eq!(policy.validate().unwrap_err().to_string(), "network.hosts entry \"repo.test\" has no address");
    policy.hosts.clear();
    policy.max_concurrent = 0;
    assert_eq!(policy.validate().unwrap_err().to_string(), "network.max_concurrent must be above 0");
}
