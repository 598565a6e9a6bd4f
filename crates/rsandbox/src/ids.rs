//! The ids every front hands out for sessions and jobs: unguessable (128 bits from the
//! OS's random source) and carrying the node that holds them, so a load balancer can
//! route a session's requests to its node by the id alone.
//!
//! Format: `s-<node>-<32 hex>` for sessions, `j-<node>-<32 hex>` for jobs. The node tag
//! is `--node-id` ([`set_node`]), else the environment's `RSANDBOX_NODE_ID`, else the
//! host name; a host name is lowered and every character outside `[a-z0-9-]` becomes
//! `-` (at most 32 characters); an explicit tag must already be of that form.
//!
//! Knowing one id tells nothing about another: an id is a capability only together
//! with the token that owns it, and a guessed id is reported like an unknown one.

use std::sync::OnceLock;

/// Longest node tag.
pub const MAX_NODE_LEN: usize = 32;

static NODE: OnceLock<String> = OnceLock::new();

/// Why a node tag was refused.
#[derive(Debug, thiserror::Error)]
#[error("invalid node id {0:?}: use 1-32 characters of a-z, 0-9 and '-'")]
pub struct BadNode(pub String);

/// Whether `tag` is a node tag as given (`[a-z0-9-]{1,32}`).
pub fn valid_node(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= MAX_NODE_LEN
        && tag.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A host name as a node tag: lowered, other characters as `-`, at most 32
/// characters, without leading or trailing `-`; `node` when nothing is left.
pub fn sanitize(name: &str) -> String {
    let mapped: String = name
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() { c } else { '-' })
        .take(MAX_NODE_LEN)
        .collect();
    let trimmed = mapped.trim_matches('-');
    if trimmed.is_empty() {
        "node".to_string()
    } else {
        trimmed.to_string()
    }
}

/// Set the node tag (from `--node-id`) before the first id is minted. Refuses a tag not
/// of the form `[a-z0-9-]{1,32}`, and a second, different tag.
pub fn set_node(tag: &str) -> Result<(), BadNode> {
    if !valid_node(tag) {
        return Err(BadNode(tag.to_string()));
    }
    match NODE.set(tag.to_string()) {
        Ok(()) => Ok(()),
        Err(_) if node() == tag => Ok(()),
        Err(_) => Err(BadNode(format!("{tag} (the node id is already {})", node()))),
    }
}

/// The node tag: [`set_node`]'s, else `RSANDBOX_NODE_ID` (when valid), else the host
/// name, sanitized.
pub fn node() -> &'static str {
    NODE.get_or_init(|| {
        if let Some(tag) = std::env::var("RSANDBOX_NODE_ID").ok().filter(|t| valid_node(t)) {
            return tag;
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        sanitize(host.trim())
    })
}

/// The node tag `RSANDBOX_NODE_ID` asks for, checked (for the CLI to refuse a bad one
/// before it serves): `Ok(None)` when unset.
pub fn node_from_env() -> Result<Option<String>, BadNode> {
    match std::env::var("RSANDBOX_NODE_ID") {
        Ok(tag) if valid_node(&tag) => Ok(Some(tag)),
        Ok(tag) => Err(BadNode(tag)),
        Err(_) => Ok(None),
    }
}

/// 128 random bits from the OS, as 32 hex digits.
fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    // The OS's random source failing is not something a server can serve around: ids
    // would become guessable.
    getrandom::fill(&mut bytes).expect("the OS random source (getrandom) failed");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What [`session_id`] makes, as a regular expression (for the protocol's schema): the
/// node is [`valid_node`]'s characters, at most [`MAX_NODE_LEN`] of them.
pub const SESSION_ID_PATTERN: &str = "^s-[a-z0-9-]{1,32}-[0-9a-f]{32}$";

/// A new session id: `s-<node>-<32 hex>`.
pub fn session_id() -> String {
    format!("s-{}-{}", node(), random_hex())
}

/// A new id for anything else the engine names in its audit log (`e` an evaluation,
/// `p` a pool, …): `<prefix>-<node>-<32 hex>`.
pub fn other_id(prefix: &str) -> String {
    format!("{prefix}-{}-{}", node(), random_hex())
}

/// A new job id: `j-<node>-<32 hex>`.
pub fn job_id() -> String {
    format!("j-{}-{}", node(), random_hex())
}

/// The node tag of an id this module made (`None` for anything else).
pub fn node_of(id: &str) -> Option<&str> {
    let rest = id.strip_prefix("s-").or_else(|| id.strip_prefix("j-"))?;
    let (node, hex) = rest.rsplit_once('-')?;
    (hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()) && valid_node(node)).then_some(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_the_node_and_128_random_bits() {
        let (a, b) = (session_id(), session_id());
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("s-{}-", node())), "{a}");
        assert_eq!(node_of(&a), Some(node()));
        let hex = a.rsplit('-').next().unwrap();
        assert_eq!(hex.len(), 32, "{a}");
        let j = job_id();
        assert!(j.starts_with("j-") && node_of(&j) == Some(node()), "{j}");
        assert_eq!(node_of("session-1"), None);
        assert_eq!(node_of("job-1"), None);
    }

    #[test]
    fn host_names_become_tags() {
        assert_eq!(sanitize("Web_01.Example.COM"), "web-01-example-com");
        assert_eq!(sanitize("..."), "node");
        assert_eq!(sanitize(&"a".repeat(40)).len(), MAX_NODE_LEN);
        assert!(valid_node("eu-west-3"));
        assert!(!valid_node("Eu") && !valid_node("") && !valid_node(&"a".repeat(33)) && !valid_node("a_b"));
    }
}
