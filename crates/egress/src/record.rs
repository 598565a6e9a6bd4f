//! What the proxy reports of each connection.

use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// One connection the sandbox opened to the proxy during a request, allowed or not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConnectionRecord {
    /// The host asked for (CONNECT target or the URL's host); empty when the request
    /// could not be read.
    pub host: String,
    /// The port asked for; 0 when the request could not be read.
    pub port: u16,
    /// Whether the policy let it through to an upstream.
    pub allowed: bool,
    /// The upstream address connected to (the one checked: names are resolved once).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub address: Option<IpAddr>,
    /// Bytes from upstream to the sandbox.
    pub bytes_in: u64,
    /// Bytes from the sandbox to upstream (the request head included for plain HTTP).
    pub bytes_out: u64,
    /// From accept to close, in milliseconds.
    pub duration_ms: u64,
    /// Why it was denied or ended early, in words; `None` when it ran to its end.
    pub reason: Option<String>,
}

impl ConnectionRecord {
    /// A connection whose request is not read yet: no host, not allowed, nothing counted.
    pub(crate) fn unread() -> ConnectionRecord {
        ConnectionRecord {
            host: String::new(),
            port: 0,
            allowed: false,
            address: None,
            bytes_in: 0,
            bytes_out: 0,
            duration_ms: 0,
            reason: None,
        }
    }

    /// A connection refused before its request was read (a cap was reached).
    pub(crate) fn unread_refused(reason: String) -> ConnectionRecord {
        ConnectionRecord { reason: Some(reason), ..ConnectionRecord::unread() }
    }
}
