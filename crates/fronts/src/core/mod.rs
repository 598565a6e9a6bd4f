//! The service core every front adapts: one session registry ([`registry`]), one set of
//! server ceilings ([`caps`]) and of network allowlists per token ([`network`]), one bridge
//! for tool calls the client answers ([`bridge`]), one set of error codes ([`error`])
//! and one description of outcomes in words ([`outcome`]). A front parses its
//! transport, calls these and the engine, and renders the answer; it decides nothing
//! of its own.

pub mod bridge;
pub mod caps;
pub mod error;
pub mod network;
pub mod outcome;
pub mod registry;
pub mod schema;

pub use caps::Caps;
pub use error::{ErrorCode, ServiceError};
pub use network::{TokenNetworkError, TokenNetworks};
pub use registry::{Owner, Registry, SessionCaps};
