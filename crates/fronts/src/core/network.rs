//! Network ceilings per token: the token file's `network=` ([`crate::auth`]) between the
//! server profile's `[network]` allowlist and a request's `limits.network`. Checked once
//! at start ([`TokenNetworks::new`]: a token's list lies within the server's), applied
//! once per request ([`TokenNetworks::bound`]: a token's request gets the token's list by
//! default and may narrow it, never widen it), by every network front (HTTP's eval, jobs
//! and sessions; MCP's sessions). The engine then narrows the result by the profile again
//! (`Engine::network_for`), which a list within it passes unchanged.

use super::error::ServiceError;
use crate::auth::Tokens;
use rsandbox::{EngineError, EvalOptions, Network};
use std::collections::HashMap;

/// Why a server refuses to start with its token file: a token's `network=` reaches past
/// the server's allowlist. Names the token's name, never the token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenNetworkError {
    /// An entry the server profile's `[network] allow` does not cover.
    #[error(
        "token {name}: network entry {entry:?} is outside this server's network allowlist ({server}); \
         a token's network= may only narrow the profile's [network] allow"
    )]
    Outside {
        /// The token's name.
        name: String,
        /// The entry.
        entry: String,
        /// The server's allowlist, as a message shows it.
        server: String,
    },
    /// A token allows hosts where the server's profile has no `[network]` table.
    #[error(
        "token {name}: network={hosts} asks for hosts, but this server has no network allowlist (its profile has \
         no [network] table); add them to the profile's [network] allow, or drop network= from the token"
    )]
    NoServerNetwork {
        /// The token's name.
        name: String,
        /// Its entries, comma-separated.
        hosts: String,
    },
    /// An entry that is not a host pattern (the token file's parser checks them first,
    /// so this is only reached through a `Tokens` made another way).
    #[error("token {name}: {message}")]
    Bad {
        /// The token's name.
        name: String,
        /// What is wrong with the entry.
        message: String,
    },
}

/// The network allowlists of the tokens that have their own, each checked to lie within
/// the server's; a token absent here gets the server's.
#[derive(Clone, Debug, Default)]
pub struct TokenNetworks {
    by_name: HashMap<String, Vec<String>>,
}

impl TokenNetworks {
    /// The tokens' allowlists, each checked against `server` (the profile's `[network]`;
    /// `None`: the server has no network, so a token may only have an empty list).
    pub fn new(tokens: Option<&Tokens>, server: Option<&Network>) -> Result<TokenNetworks, TokenNetworkError> {
        let mut by_name = HashMap::new();
        for (name, allow) in tokens.into_iter().flat_map(Tokens::networks) {
            match server {
                None if !allow.is_empty() => {
                    return Err(TokenNetworkError::NoServerNetwork { name: name.to_owned(), hosts: allow.join(",") })
                }
                None => {}
                Some(server) => {
                    let outside = server
                        .first_outside(allow)
                        .map_err(|e| TokenNetworkError::Bad { name: name.to_owned(), message: e.to_string() })?;
                    if let Some(entry) = outside {
                        return Err(TokenNetworkError::Outside {
                            name: name.to_owned(),
                            entry: entry.to_owned(),
                            server: server.allow_list(),
                        });
                    }
                }
            }
            by_name.insert(name.to_owned(), allow.to_vec());
        }
        Ok(TokenNetworks { by_name })
    }

    /// The options of a request by `token` (its name): with no network of its own
    /// (`options.network` is `None`) it gets the token's allowlist; one it asked for
    /// must lie within the token's, else bad input naming the entry. A token without
    /// `network=` leaves the options as they are (the server's allowlist applies).
    pub fn bound(&self, token: &str, mut options: EvalOptions) -> Result<EvalOptions, ServiceError> {
        let Some(allow) = self.by_name.get(token) else {
            return Ok(options);
        };
        let ceiling = Network { allow: allow.clone(), list: rsandbox::Allowlist::Token, ..Network::default() };
        match &options.network {
            None => options.network = Some(ceiling),
            Some(asked) => {
                let outside = ceiling.first_outside(&asked.allow).map_err(EngineError::from)?;
                if let Some(entry) = outside {
                    return Err(ServiceError::bad_input(format!(
                        "network.allow entry {entry:?} is outside this token's network allowlist ({}): a request may \
                         narrow it, never widen it",
                        ceiling.allow_list()
                    )));
                }
            }
        }
        Ok(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ErrorCode;

    fn network(allow: &[&str]) -> Network {
        Network { allow: allow.iter().map(|s| s.to_string()).collect(), ..Network::default() }
    }

    const FILE: &str = "narrow:0123456789abcdef0123 network=a.test\nwide:fedcba9876543210fedc\n\
                        none:00112233445566778899 network=\n";

    #[test]
    fn a_token_gets_its_list_by_default_and_may_narrow_it_never_widen_it() {
        let tokens = Tokens::parse(FILE).unwrap().unwrap();
        let networks = TokenNetworks::new(Some(&tokens), Some(&network(&["a.test", "b.test"]))).unwrap();
        let by_default = networks.bound("narrow", EvalOptions::default()).unwrap();
        assert_eq!(by_default.network.unwrap().allow, ["a.test"]);
        let asked = EvalOptions { network: Some(network(&["b.test"])), ..EvalOptions::default() };
        let refused = networks.bound("narrow", asked.clone()).unwrap_err();
        assert_eq!(refused.code, ErrorCode::BadInput);
        assert!(
            refused.message.contains("\"b.test\" is outside this token's network allowlist (a.test)"),
            "{}",
            refused.message
        );
        // The wide token is left to the server's allowlist (the engine narrows by it).
        assert_eq!(networks.bound("wide", asked.clone()).unwrap().network, asked.network);
        assert_eq!(networks.bound("wide", EvalOptions::default()).unwrap().network, None);
        // An empty list: no network by default, and nothing may be asked for.
        assert!(!networks.bound("none", EvalOptions::default()).unwrap().network.unwrap().is_on());
        assert!(networks.bound("none", asked).unwrap_err().message.contains("this token's network allowlist ((none))"));
        let off = EvalOptions { network: Some(network(&[])), ..EvalOptions::default() };
        assert!(!networks.bound("narrow", off).unwrap().network.unwrap().is_on(), "turning it off is narrowing");
    }

    #[test]
    fn a_token_list_outside_the_servers_is_refused_at_start_by_the_tokens_name() {
        let tokens = Tokens::parse(FILE).unwrap().unwrap();
        let error = TokenNetworks::new(Some(&tokens), Some(&network(&["b.test"]))).unwrap_err().to_string();
        assert!(error.contains("token narrow") && error.contains("\"a.test\""), "{error}");
        assert!(!error.contains("0123456789abcdef"), "never the token: {error}");
        let error = TokenNetworks::new(Some(&tokens), None).unwrap_err().to_string();
        assert!(error.contains("token narrow") && error.contains("no [network] table"), "{error}");
        // An empty list fits any server, even one without a network.
        let empty = Tokens::parse("none:00112233445566778899 network=\n").unwrap().unwrap();
        assert!(TokenNetworks::new(Some(&empty), None).is_ok());
        assert!(TokenNetworks::new(None, None).unwrap().bound("local", EvalOptions::default()).is_ok());
        // A wildcard of the server's covers names under it.
        let under =
            Tokens::parse("w:00112233445566778899 network=x.r-universe.dev,*.r-universe.dev\n").unwrap().unwrap();
        assert!(TokenNetworks::new(Some(&under), Some(&network(&["*.r-universe.dev"]))).is_ok());
    }
}
