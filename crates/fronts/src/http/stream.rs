//! Streaming over server-sent events, and host tools answered by the HTTP client.
//!
//! A request with `Accept: text/event-stream` gets a stream of `output` events
//! (`{stream, text}`), `tool_call` events (`{call, tool, args}`) and, last, one `result`
//! event (the result object) or one `error` event (`{error: {code, message}}`).
//!
//! A session's tools run on the client: the sandbox's call becomes a `tool_call` event on
//! the execute's stream, and the execute waits (at most until its deadline, and never
//! more than [`TOOL_REPLY_TIMEOUT`]) for `POST /v1/sessions/{id}/tool_results/{call}`.
//! A call made while no streaming execute runs fails in R with a message saying so.

use super::errors::ErrorBody;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use rsandbox::{EvalResult, Event, OutputStream, Tool, ToolSpec};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::StreamExt as _;

/// Longest a tool call waits for the client's answer.
pub const TOOL_REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// What a stream carries. Output is bounded by the request's output limit (the engine
/// stops the sandbox past it), so the channel needs no bound of its own.
#[derive(Debug)]
pub enum StreamEvent {
    Output { stream: OutputStream, text: String },
    ToolCall { call: String, tool: String, args: Value },
    Result(Box<EvalResult>),
    Error(ErrorBody),
}

impl StreamEvent {
    /// An engine event as a stream event.
    pub fn from_engine(event: Event<'_>) -> StreamEvent {
        match event {
            Event::Output { stream, text } => StreamEvent::Output { stream, text: text.to_string() },
        }
    }

    fn into_sse(self) -> SseEvent {
        let (name, data) = match self {
            StreamEvent::Output { stream, text } => ("output", json!({"stream": stream, "text": text})),
            StreamEvent::ToolCall { call, tool, args } => {
                ("tool_call", json!({"call": call, "tool": tool, "args": args}))
            }
            StreamEvent::Result(result) => {
                ("result", serde_json::to_value(*result).unwrap_or_else(|e| json!({"error": e.to_string()})))
            }
            StreamEvent::Error(body) => ("error", serde_json::to_value(body).unwrap_or(Value::Null)),
        };
        SseEvent::default().event(name).data(data.to_string())
    }
}

/// A channel for one streamed request, and the response that drains it.
pub fn channel() -> (UnboundedSender<StreamEvent>, Sse<impl tokio_stream::Stream<Item = Result<SseEvent, Infallible>>>)
{
    let (tx, rx): (_, UnboundedReceiver<StreamEvent>) = unbounded_channel();
    let events = UnboundedReceiverStream::new(rx).map(|e| Ok(e.into_sse()));
    (tx, Sse::new(events).keep_alive(KeepAlive::default()))
}

/// Whether the client asked for a stream.
pub fn wants_stream(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|t| t.trim().starts_with("text/event-stream")))
}

/// The answer to a tool call: its value, or an error the R code sees as a condition.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolReply {
    /// The tool's value (any JSON).
    #[schema(value_type = Option<Object>)]
    pub value: Option<Value>,
    /// Set instead of `value` when the tool failed.
    pub error: Option<String>,
}

type Answer = Result<Value, String>;

/// Where a session's tool calls meet the client: the stream of the execute running
/// now (if it streams), and the calls waiting for their answer.
#[derive(Default)]
pub struct ToolBridge {
    listener: Mutex<Option<(UnboundedSender<StreamEvent>, Instant)>>,
    pending: Mutex<HashMap<String, mpsc::Sender<Answer>>>,
    next_call: AtomicU64,
    closed: std::sync::atomic::AtomicBool,
}

/// The stream a bridge sends calls to, until dropped.
pub struct Attached<'b>(&'b ToolBridge);

impl Drop for Attached<'_> {
    fn drop(&mut self) {
        *self.0.listener.lock().expect("listener") = None;
    }
}

impl ToolBridge {
    /// The session's tools, their handlers crossing this bridge.
    pub fn tools(self: &std::sync::Arc<Self>, specs: Vec<ToolSpec>) -> Result<Vec<Tool>, String> {
        specs
            .into_iter()
            .map(|spec| {
                let bridge = self.clone();
                let name = spec.name.clone();
                Tool::new(spec, move |args| bridge.call(&name, Value::Object(args.clone())))
            })
            .collect()
    }

    /// Send tool calls to `stream` until the guard drops; none waits past `deadline`.
    pub fn attach(&self, stream: UnboundedSender<StreamEvent>, deadline: Instant) -> Attached<'_> {
        *self.listener.lock().expect("listener") = Some((stream, deadline));
        Attached(self)
    }

    /// Hand the client's answer to the waiting call; `false` when no call of that id waits.
    pub fn answer(&self, call: &str, answer: Answer) -> bool {
        match self.pending.lock().expect("pending").remove(call) {
            Some(waiting) => waiting.send(answer).is_ok(),
            None => false,
        }
    }

    /// The session is gone: fail the waiting calls and any later one.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.pending.lock().expect("pending").clear();
    }

    fn call(&self, tool: &str, args: Value) -> Answer {
        let Some((stream, deadline)) = self.listener.lock().expect("listener").clone() else {
            return Err("tool calls need a streaming execute (Accept: text/event-stream) to reach the client".into());
        };
        let call = format!("call-{}", self.next_call.fetch_add(1, Ordering::SeqCst));
        let (tx, rx) = mpsc::channel();
        {
            let mut pending = self.pending.lock().expect("pending");
            if self.closed.load(Ordering::SeqCst) {
                return Err("the session was deleted".into());
            }
            pending.insert(call.clone(), tx);
        }
        if stream.send(StreamEvent::ToolCall { call: call.clone(), tool: tool.to_string(), args }).is_err() {
            self.pending.lock().expect("pending").remove(&call);
            return Err("the client closed the stream".into());
        }
        let wait = deadline.saturating_duration_since(Instant::now()).min(TOOL_REPLY_TIMEOUT);
        let answer = rx.recv_timeout(wait);
        self.pending.lock().expect("pending").remove(&call);
        answer.unwrap_or_else(|_| Err(format!("no tool result for {call} within {} s", wait.as_secs())))
    }
}
