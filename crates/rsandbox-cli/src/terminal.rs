//! Text from a sandbox, on its way to a person's terminal.
//!
//! What the sandbox printed is its own choice of bytes. On a terminal, control
//! sequences are commands: a sandbox could set the window title, write the clipboard
//! (OSC 52), move the cursor to rewrite what was printed before, or hide its output.
//! So when the CLI writes sandbox text to a terminal, every control character except
//! newline and tab (C0, DEL and the C1 range) is shown as an escape (`\x1b`) instead of
//! being sent. Into a pipe or a file the bytes go unchanged: the reader asked for them.

use std::borrow::Cow;
use std::io::IsTerminal;

/// Whether standard output and standard error are terminals.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Terminals {
    pub(crate) stdout: bool,
    pub(crate) stderr: bool,
}

impl Terminals {
    pub(crate) fn detect() -> Terminals {
        Terminals { stdout: std::io::stdout().is_terminal(), stderr: std::io::stderr().is_terminal() }
    }
}

/// `text` made inert when standard error is a terminal.
pub(crate) fn inert_on_stderr(text: &str) -> Cow<'_, str> {
    inert(text, Terminals::detect().stderr)
}

/// `text` made inert for a terminal when `terminal` is set.
pub(crate) fn inert(text: &str, terminal: bool) -> Cow<'_, str> {
    let active = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !terminal || !text.chars().any(active) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if active(c) {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sequences_are_shown_not_sent_to_a_terminal() {
        let title = "a\x1b]0;owned\x07b\n\tc\u{9b}2J\r";
        assert_eq!(inert(title, true), "a\\x1b]0;owned\\x07b\n\tc\\x9b2J\\x0d");
        assert_eq!(inert(title, false), title, "a pipe gets the bytes");
        assert!(matches!(inert("plain\ntext\t", true), Cow::Borrowed(_)));
    }
}
