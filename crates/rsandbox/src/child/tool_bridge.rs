//! Tool calls from a child, answered on the host: counted against the per-execute cap,
//! size-checked, checked against the tool's declared arguments, run, and audited.

use crate::tools::{check_call, Tool, MAX_TOOL_NAME};
use wire::messages::ChildRequest;

/// A tool call as the audit log sees it: after the checks, so a refused call is logged
/// with its refusal, and with the argument text for the log to excerpt and hash (never
/// stored whole).
#[derive(Debug)]
pub enum ToolEvent<'a> {
    /// A call arrived and was checked.
    Call {
        /// Tool name (already bounded: at most [`crate::tools::MAX_TOOL_NAME`] bytes).
        tool: &'a str,
        /// The arguments as JSON text.
        args: &'a str,
        /// Why the call was refused, if it was.
        refused: Option<&'a str>,
    },
    /// The answer sent back.
    Result {
        /// Tool name.
        tool: &'a str,
        /// Whether it succeeded.
        ok: bool,
        /// The error text when it did not.
        error: Option<&'a str>,
    },
}

/// The tools of one request and how many calls it has made.
pub(crate) struct ToolBridge<'r, 'a> {
    pub(crate) tools: &'a [Tool],
    pub(crate) max_calls: u32,
    pub(crate) max_message: usize,
    pub(crate) observer: &'r mut dyn FnMut(ToolEvent<'_>),
    pub(crate) calls: u32,
    /// The cap was hit: the session is reset after this request.
    pub(crate) cap_exceeded: bool,
}

impl ToolBridge<'_, '_> {
    /// Check and run one call; the reply to send back. Checks run cheapest first (the
    /// count, the size, the name), and nothing the sandbox sent is echoed beyond an
    /// excerpt, so a hostile call costs the host a bounded amount.
    pub(crate) fn answer(&mut self, call: u64, tool: &str, args: &serde_json::Value) -> ChildRequest {
        self.calls = self.calls.saturating_add(1);
        let args_text = args.to_string();
        let tool = if tool.len() > MAX_TOOL_NAME { &tool[..tool.floor_char_boundary(MAX_TOOL_NAME)] } else { tool };
        let checked = if self.calls > self.max_calls {
            self.cap_exceeded = true;
            Err(format!("tool call limit of {} per execute exceeded", self.max_calls))
        } else if args_text.len() > self.max_message {
            Err(format!("tool call message of {} bytes exceeds the limit of {}", args_text.len(), self.max_message))
        } else {
            check_call(self.tools, tool, args)
        };
        (self.observer)(ToolEvent::Call {
            tool,
            args: &args_text,
            refused: checked.as_ref().err().map(String::as_str),
        });
        let answer = checked.and_then(|t| {
            let empty = serde_json::Map::new();
            (t.handler)(args.as_object().unwrap_or(&empty))
        });
        (self.observer)(ToolEvent::Result {
            tool,
            ok: answer.is_ok(),
            error: answer.as_ref().err().map(String::as_str),
        });
        match answer {
            Ok(value) => ChildRequest::ToolReply { call, value: Some(value), error: None },
            Err(error) => ChildRequest::ToolReply { call, value: None, error: Some(error) },
        }
    }
}
