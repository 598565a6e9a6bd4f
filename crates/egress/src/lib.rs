//! The host-side egress proxy of rsandbox.
//!
//! A sandbox has no route out. When its profile allows hosts, the sandbox gets one
//! listening TCP socket inside its own network namespace, and this crate serves it from
//! the supervisor's side: an HTTP proxy (CONNECT for TLS, absolute-form requests for plain
//! HTTP) that lets a connection through only when
//!
//! - the target is a *name* matching a rule of [`NetworkPolicy::allow`], on the rule's port
//!   (IP literals are never allowed, in any spelling);
//! - every address the name resolves to (or the operator's [`NetworkPolicy::hosts`]
//!   override) is a public one: not loopback, private, link-local, CGNAT, multicast,
//!   IPv4-mapped, or one of this host's own addresses; the proxy connects to the address
//!   it checked (no second lookup, so no DNS rebinding);
//! - for CONNECT, the TLS ClientHello's server name is the CONNECT host (no domain
//!   fronting); for plain HTTP, the `Host` header is the target and one request is served
//!   per connection;
//! - the request's byte, connection and time caps are not spent.
//!
//! It knows nothing of R or of the sandbox: the engine hands it a listener and a policy.
//!
//! ```no_run
//! use std::sync::Arc;
//! let egress = egress::Egress::start()?;
//! let policy = egress::NetworkPolicy::allowing(["cloud.r-project.org".parse().unwrap()]);
//! # let listener: std::os::fd::OwnedFd = std::net::TcpListener::bind("127.0.0.1:0")?.into();
//! let handle = egress.serve(listener, Arc::new(policy))?;
//! handle.begin_request(None);
//! // ... the sandbox runs ...
//! for record in handle.end_request() {
//!     println!("{}:{} allowed={} {:?}", record.host, record.port, record.allowed, record.reason);
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
#![deny(missing_docs)]

pub mod address;
pub mod clienthello;
mod http;
pub mod policy;
mod proxy;
mod record;

pub use policy::{normalize_host, AllowRule, Allowlist, Denial, HostError, NetworkPolicy, PolicyError, RuleError};
pub use proxy::{Egress, EgressHandle, DENIED_HEADER, ERROR_HEADER};
pub use record::ConnectionRecord;

// The engine keeps both in structures shared between threads.
const _: () = {
    const fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Egress>();
    send_and_sync::<EgressHandle>();
    send_and_sync::<NetworkPolicy>();
};
