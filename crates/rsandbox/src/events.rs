//! What an evaluation reports while it runs, for fronts that stream: one event type
//! that each front maps to its transport (stdio lines, server-sent events, an R
//! `output_handler`).

use serde::{Deserialize, Serialize};

/// Which stream a piece of output belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputStream {
    /// What the code printed (auto-printed values included).
    Stdout,
    /// What the code wrote to stderr.
    Stderr,
    /// A `message()`.
    Message,
    /// A warning, as R would show it.
    Warning,
}

impl OutputStream {
    /// From the child's name for it.
    pub(crate) fn from_child(name: &str) -> Option<OutputStream> {
        match name {
            "message" => Some(OutputStream::Message),
            "warning" => Some(OutputStream::Warning),
            _ => None,
        }
    }
}

/// An event during an evaluation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// Output as it is produced (the result still holds all of it).
    Output {
        /// Which stream.
        stream: OutputStream,
        /// The text (complete UTF-8 characters; invalid bytes replaced).
        text: &'a str,
    },
}
