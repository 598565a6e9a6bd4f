//! The fronts of rsandbox: thin layers that turn a transport's requests into calls of
//! the one engine API ([`rsandbox::Engine`]) and its results into the transport's
//! format. None of them decides an outcome; all of them serve from the engine's
//! pre-forked children.
//!
//! * [`stdio`]: newline-delimited JSON on stdin/stdout (`rsandbox serve --stdio`,
//!   `docs/protocol.md`), the protocol the R package speaks;
//! * [`mcp`] (feature `mcp`): a Model Context Protocol server for AI agents;
//! * [`lint`] (feature `lint`): the advisory tree-sitter lint;
//! * [`http`] (feature `http`): the HTTP API (`rsandbox serve --http`);
//! * [`listen`]: the accept loop and body limit of every HTTP listener;
//! * [`core`]: the service core under every front (sessions, tool calls, errors, outcomes);
//! * [`auth`]: token files and the loopback rule shared by the network fronts;
//! * [`request`]: limits and files as every front accepts them;
//! * [`ids`]: the session and job ids every front hands out.
#![deny(missing_docs)]

pub mod auth;
pub mod core;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "lint")]
pub mod lint;
#[cfg(any(feature = "mcp", feature = "http"))]
pub mod listen;
#[cfg(feature = "mcp")]
pub mod mcp;
mod reading;
pub mod request;
#[cfg(any(feature = "mcp", feature = "http"))]
pub mod shutdown;
pub mod stdio;
