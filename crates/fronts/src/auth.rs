//! Who may talk to a network front: the token file, the bearer check and the rule that
//! an address other than loopback needs tokens. The MCP server over HTTP and the HTTP
//! service both use this module, so the rule has one owner.
//!
//! A token file holds one `NAME:TOKEN` per line (blank lines and `#` comments allowed).
//! The name is what logs and metrics show; the token never leaves this module. The file
//! must not be readable or writable by group or others, like an ssh key.
//!
//! After the token, separated by spaces, a line may narrow what that token may do:
//!
//! ```text
//! # alice may reach two hosts, bob none; carol gets the server profile's allowlist
//! alice:2f8c0e6b9a1d4c7e network=cran.test,*.r-universe.dev
//! bob:7d3a9b2e5f0c1a84 network=
//! carol:c4e1f7a2b8d05e93
//! ```
//!
//! `network=HOST,HOST,…` is that token's network allowlist (entries as in a profile's
//! `[network] allow`; empty: no network). It must lie within the server profile's
//! `[network]` allowlist (checked at start: [`crate::core::TokenNetworks`]); the token's
//! requests get it by default and may narrow it, never widen it. A token without it gets
//! the server's allowlist.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use subtle::ConstantTimeEq;

/// Shortest token accepted: anything shorter can be guessed.
pub const MIN_TOKEN_LEN: usize = 16;

/// Why a token file or a bind address was refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The file could not be read.
    #[error("cannot read the token file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the kernel said.
        source: std::io::Error,
    },
    /// Group or others may read or write the file.
    #[error("the token file {path} is accessible to group or others (mode {mode:o}); run: chmod 600 {path}")]
    Permissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A line is not `NAME:TOKEN` with a sane name and a long enough token.
    #[error("token file {path}, line {line}: {problem}")]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it (never the token itself).
        problem: String,
    },
    /// The file holds no token.
    #[error("the token file {path} holds no NAME:TOKEN line")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// A non-loopback address without tokens.
    #[error("refusing to listen on {addr} without authentication: only loopback addresses may be served without --token-file")]
    OpenBind {
        /// The address asked for.
        addr: SocketAddr,
    },
}

/// The tokens a server accepts, each with the name logs use for it.
#[derive(Clone)]
pub struct Tokens {
    entries: Vec<Entry>,
}

/// One line of the file.
#[derive(Clone)]
struct Entry {
    name: String,
    token: Vec<u8>,
    /// `network=…`: the token's network allowlist (`None`: the server's).
    network: Option<Vec<String>>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secrets stay out of any debug print.
        f.debug_struct("Tokens").field("names", &self.names().collect::<Vec<_>>()).finish()
    }
}

impl Tokens {
    /// Reads and checks a token file.
    pub fn load(path: &Path) -> Result<Tokens, AuthError> {
        let read_error = |source| AuthError::Read { path: path.to_owned(), source };
        let metadata = std::fs::metadata(path).map_err(read_error)?;
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(AuthError::Permissions { path: path.to_owned(), mode });
        }
        let text = std::fs::read_to_string(path).map_err(read_error)?;
        Tokens::parse(&text)
            .map_err(|(line, problem)| AuthError::Line { path: path.to_owned(), line, problem })?
            .ok_or_else(|| AuthError::Empty { path: path.to_owned() })
    }

    /// Parses the text of a token file: `Ok(None)` when it holds no token, `Err((line,
    /// problem))` for the first bad line.
    pub fn parse(text: &str) -> Result<Option<Tokens>, (usize, String)> {
        let mut entries = Vec::new();
        let mut names = HashSet::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fail = |problem: &str| Err((index + 1, problem.to_owned()));
            let Some((name, rest)) = line.split_once(':') else {
                return fail("expected NAME:TOKEN");
            };
            let mut words = rest.split_whitespace();
            let token = words.next().unwrap_or_default();
            if name.is_empty()
                || name.len() > 64
                || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return fail("the name must be 1-64 characters of letters, digits, '-', '_' or '.'");
            }
            if token.len() < MIN_TOKEN_LEN || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return fail(&format!("the token must be at least {MIN_TOKEN_LEN} characters without spaces"));
            }
            if !names.insert(name.to_owned()) {
                return fail(&format!("the name {name} appears twice"));
            }
            let mut network = None;
            for word in words {
                // Never echo a word that is not a known option: it may be the second half
                // of a token with a space in it.
                let Some(hosts) = word.strip_prefix("network=") else {
                    return fail("after the token only network=HOST,HOST,... may follow (a token has no spaces)");
                };
                if network.is_some() {
                    return fail("network= appears twice");
                }
                network = Some(network_option(hosts).map_err(|problem| (index + 1, problem))?);
            }
            entries.push(Entry { name: name.to_owned(), token: token.as_bytes().to_vec(), network });
        }
        Ok((!entries.is_empty()).then_some(Tokens { entries }))
    }

    /// The name of the token that `presented` matches, or `None`. Every token is compared,
    /// each in constant time, so the answer's timing says nothing about which one was near.
    pub fn check(&self, presented: &[u8]) -> Option<&str> {
        let mut found = None;
        for entry in &self.entries {
            if bool::from(entry.token.as_slice().ct_eq(presented)) {
                found = Some(entry.name.as_str());
            }
        }
        found
    }

    /// The name of the token in an `Authorization` header value (`Bearer TOKEN`).
    pub fn check_bearer(&self, header: &str) -> Option<&str> {
        let token = header.strip_prefix("Bearer ").or_else(|| header.strip_prefix("bearer "))?;
        self.check(token.trim().as_bytes())
    }

    /// The token names, for logs and metrics.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|entry| entry.name.as_str())
    }

    /// The network allowlists of the tokens that have one (`network=`), by token name.
    pub fn networks(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.entries.iter().filter_map(|entry| Some((entry.name.as_str(), entry.network.as_deref()?)))
    }
}

/// The hosts of `network=HOSTS`: comma-separated allow entries, each checked as a
/// profile's would be (empty: no network).
fn network_option(hosts: &str) -> Result<Vec<String>, String> {
    if hosts.is_empty() {
        return Ok(Vec::new());
    }
    let allow: Vec<String> = hosts.split(',').map(str::to_owned).collect();
    if allow.iter().any(String::is_empty) {
        return Err(format!("network={hosts}: an empty entry (hosts are separated by single commas)"));
    }
    let network = rsandbox::Network { allow, ..rsandbox::Network::default() };
    network.policy().map_err(|e| format!("network={hosts}: {e}"))?;
    Ok(network.allow)
}

/// The loopback rule: a server without tokens listens on loopback addresses only.
pub fn check_bind(addr: SocketAddr, tokens: Option<&Tokens>) -> Result<(), AuthError> {
    if tokens.is_none() && !addr.ip().is_loopback() {
        return Err(AuthError::OpenBind { addr });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "# operators\nalice:0123456789abcdef0123\n\nbob:fedcba9876543210fedc\n";

    #[test]
    fn a_token_maps_to_its_name_and_nothing_else_matches() {
        let tokens = Tokens::parse(GOOD).unwrap().unwrap();
        assert_eq!(tokens.check(b"0123456789abcdef0123"), Some("alice"));
        assert_eq!(tokens.check_bearer("Bearer fedcba9876543210fedc"), Some("bob"));
        assert_eq!(tokens.check(b"0123456789abcdef012"), None);
        assert_eq!(tokens.check(b""), None);
        assert_eq!(tokens.check_bearer("Basic 0123456789abcdef0123"), None);
    }

    #[test]
    fn bad_lines_are_named_by_number_without_the_secret() {
        let (line, problem) = Tokens::parse("alice:0123456789abcdef0123\nbob:short\n").err().unwrap();
        assert_eq!(line, 2);
        assert!(problem.contains("at least 16"), "{problem}");
        assert!(!problem.contains("short"));
        assert_eq!(Tokens::parse("no colon here").err().unwrap().0, 1);
        assert_eq!(Tokens::parse("a:0123456789abcdef0123\na:0123456789abcdef0124").err().unwrap().0, 2);
        assert!(Tokens::parse("# nothing\n").unwrap().is_none());
    }

    #[test]
    fn a_token_may_carry_its_own_network_allowlist() {
        let text = "alice:0123456789abcdef0123 network=a.test,*.b.test\nbob:fedcba9876543210fedc   network=\n\
                    carol:00112233445566778899\n";
        let tokens = Tokens::parse(text).unwrap().unwrap();
        assert_eq!(tokens.check(b"0123456789abcdef0123"), Some("alice"), "the option is not part of the token");
        let networks: Vec<(&str, &[String])> = tokens.networks().collect();
        assert_eq!(networks.len(), 2, "carol has none");
        assert_eq!(networks[0], ("alice", &["a.test".to_string(), "*.b.test".to_string()][..]));
        assert_eq!(networks[1], ("bob", &[][..]), "an empty network= is no network");
    }

    #[test]
    fn a_bad_option_is_named_without_the_token() {
        // A token with a space in it: its second half is not echoed.
        let (line, problem) = Tokens::parse("alice:0123456789abcdef0123 secret-half").err().unwrap();
        assert_eq!(line, 1);
        assert!(problem.contains("only network=") && !problem.contains("secret-half"), "{problem}");
        let (_, problem) = Tokens::parse("alice:0123456789abcdef0123 network=10.0.0.1").err().unwrap();
        assert!(problem.contains("10.0.0.1") && !problem.contains("0123456789abcdef"), "{problem}");
        let (_, problem) = Tokens::parse("alice:0123456789abcdef0123 network=a.test,,b.test").err().unwrap();
        assert!(problem.contains("empty entry"), "{problem}");
        let (_, problem) = Tokens::parse("alice:0123456789abcdef0123 network=a.test network=b.test").err().unwrap();
        assert!(problem.contains("twice"), "{problem}");
    }

    #[test]
    fn a_file_others_can_read_is_refused() {
        let dir = std::env::temp_dir().join(format!("rsandbox-auth-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens");
        std::fs::write(&path, GOOD).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = Tokens::load(&path).unwrap_err();
        assert!(matches!(error, AuthError::Permissions { mode: 0o644, .. }), "{error}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(Tokens::load(&path).unwrap().names().collect::<Vec<_>>(), ["alice", "bob"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_loopback_is_served_without_tokens() {
        let tokens = Tokens::parse(GOOD).unwrap().unwrap();
        assert!(check_bind("127.0.0.1:8080".parse().unwrap(), None).is_ok());
        assert!(check_bind("[::1]:8080".parse().unwrap(), None).is_ok());
        assert!(matches!(check_bind("0.0.0.0:8080".parse().unwrap(), None), Err(AuthError::OpenBind { .. })));
        assert!(check_bind("0.0.0.0:8080".parse().unwrap(), Some(&tokens)).is_ok());
    }
}
