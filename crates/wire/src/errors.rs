//! What can go wrong on a channel, said so that the reader knows what was expected and
//! what arrived.

use std::io;

/// Who is at the other end of a channel (for messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// The supervisor (as seen from the zygote or a child).
    Supervisor,
    /// The zygote (as seen from the supervisor).
    Zygote,
    /// A sandbox child (as seen from the supervisor).
    Child,
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Peer::Supervisor => "supervisor",
            Peer::Zygote => "zygote",
            Peer::Child => "sandbox child",
        })
    }
}

/// A channel failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The system call failed.
    #[error("failed to {action} ({peer} channel): {source}")]
    Io {
        /// What we were doing.
        action: &'static str,
        /// The other end.
        peer: Peer,
        /// The system error.
        #[source]
        source: io::Error,
    },
    /// The other end closed the channel.
    #[error("the {peer} closed the channel while we waited for {expected}")]
    Closed {
        /// The other end.
        peer: Peer,
        /// What we waited for.
        expected: &'static str,
    },
    /// A well-formed message, but not the one this step of the protocol allows.
    #[error("expected {expected} from the {peer}, got {got}")]
    Unexpected {
        /// The other end.
        peer: Peer,
        /// What this step allows.
        expected: &'static str,
        /// What arrived (its tag, or a short description).
        got: String,
    },
    /// Bytes that are not a message of this protocol (bad JSON, unknown field, oversize).
    #[error("malformed message from the {peer}: {detail}")]
    Malformed {
        /// The other end.
        peer: Peer,
        /// What was wrong.
        detail: String,
    },
}

impl WireError {
    pub(crate) fn io(action: &'static str, peer: Peer) -> impl FnOnce(io::Error) -> WireError {
        move |source| WireError::Io { action, peer, source }
    }
}
