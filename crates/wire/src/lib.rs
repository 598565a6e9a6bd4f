//! What the three processes of rsandbox say to each other: the supervisor (never links
//! R), the zygote (R started once, only forks) and each sandbox child.
//!
//! * [`messages`]: the message types of both channels;
//! * [`seqpacket`] and [`fdpass`]: the supervisor <-> zygote channel, one message per
//!   packet, fds attached;
//! * [`frame`]: length-prefixed frames on the supervisor <-> child stream;
//! * [`zygote_link`] and [`child_link`]: one typed end per role, with methods named
//!   after the protocol's steps and errors that say what was expected and what arrived;
//! * [`names`]: the names both sides paste into R code, checked on both sides.
//!
//! The zygote depends on this crate and `lockdown` only, never on the supervisor.
#![deny(missing_docs)]

pub mod child_link;
pub mod errors;
pub mod frame;
pub mod messages;
pub mod names;
pub mod seqpacket;
pub mod zygote_link;

pub use errors::{Peer, WireError};
/// File descriptors over a unix socket: the one implementation, in `lockdown` (whose
/// seccomp layer sends its listener with it).
pub use lockdown::fdpass;
