//! Tool calls from a child, answered on the host: counted against the per-execute cap,
//! size-checked, checked against the tool's declared arguments, run, and audited.

use crate::tools::{check_call, Tool};
use wire::messages::ChildRequest;

/// A tool call as the audit log sees it.
#[derive(Debug)]
pub enum ToolEvent<'a> {
    /// A call arrived (before checks).
    Call {
        /// Tool name.
        tool: &'a str,
        /// Arguments.
        args: &'a serde_json::Value,
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
    /// Check and run one call; the reply to send back.
    pub(crate) fn answer(&mut self, call: u64, tool: &str, args: &serde_json::Value) -> ChildRequest {
        self.calls += 1;
        (self.observer)(ToolEvent::Call { tool, args });
        let size = args.to_string().len();
        let answer = if self.calls > self.max_calls {
            self.cap_exceeded = true;
            Err(format!("tool call limit of {} per execute exceeded", self.max_calls))
        } else if size > self.max_message {
            Err(format!("tool call message of {size} bytes exceeds the limit of {}", self.max_message))
        } else {
            check_call(self.tools, tool, args).and_then(|t| {
                let empty = serde_json::Map::new();
                (t.handler)(args.as_object().unwrap_or(&empty))
            })
        };
        (self.observer)(ToolEvent::Result { tool, ok: answer.is_ok(), error: answer.as_ref().err().map(String::as_str) });
        match answer {
            Ok(value) => ChildRequest::ToolReply { call, value: Some(value), error: None },
            Err(error) => ChildRequest::ToolReply { call, value: None, error: Some(error) },
        }
    }
}
