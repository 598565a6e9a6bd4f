//! Streaming over server-sent events, and host tools answered by the HTTP client.
//!
//! A request with `Accept: text/event-stream` gets a stream of `output` events
//! (`{stream, text}`), `tool_call` events (`{call, tool, args}`) and, last, one `result`
//! event (the result object) or one `error` event (`{error: {code, message}}`).
//!
//! A session's tools run on the client, across the core's bridge
//! (`crate::core::bridge`): the sandbox's call becomes a `tool_call` event on the
//! execute's stream, answered with `POST /v1/sessions/{id}/tool_results/{call}`. A call
//! made while no streaming execute runs fails in R with a message saying so.
//!
//! The channel between the work and the response is bounded ([`STREAM_CAPACITY`]
//! events): when a client reads slower than the code writes, the sender blocks (the
//! engine stops reading the sandbox's output, which then blocks on its pipe), and a
//! client that takes no event for [`SLOW_CLIENT_GRACE`] is cut off: its stream ends, and
//! a session's execute is interrupted as for a client that left. Nothing is buffered
//! without end.

use super::errors::ErrorBody;
use crate::core::bridge::{Sink, ToolCall};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use rsandbox::{EvalResult, Event, OutputStream};
use serde::Deserialize;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::{self as tmpsc, error::TrySendError};
use tokio::sync::Notify;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt as _;

/// Events a stream holds for a client that has not taken them yet.
pub const STREAM_CAPACITY: usize = 64;
/// How long a send waits for a client that takes nothing before the client is cut off.
pub const SLOW_CLIENT_GRACE: Duration = Duration::from_secs(10);

/// What a stream carries (through a channel of [`STREAM_CAPACITY`] events).
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

/// The sending end of one streamed request: bounded, blocking the sender while the
/// client is slow, and cutting a client that takes nothing for the grace period.
pub struct StreamSender {
    tx: Mutex<Option<tmpsc::Sender<StreamEvent>>>,
    runtime: tokio::runtime::Handle,
    grace: Duration,
    cut: Notify,
}

impl StreamSender {
    /// Send an event, waiting while the channel is full; `false` when the client is
    /// gone or was cut off (then nothing more is sent). Blocks: call it off the async
    /// threads (the engine's callbacks run on blocking threads).
    pub fn send(&self, event: StreamEvent) -> bool {
        let Some(tx) = self.tx.lock().expect("stream").clone() else { return false };
        match tx.try_send(event) {
            Ok(()) => true,
            Err(TrySendError::Closed(_)) => false,
            Err(TrySendError::Full(event)) => {
                // The timer is made inside the runtime (this thread may not be one of its own).
                match self.runtime.block_on(async { tokio::time::timeout(self.grace, tx.send(event)).await }) {
                    Ok(sent) => sent.is_ok(),
                    Err(_) => {
                        tracing::warn!(
                            grace_s = self.grace.as_secs_f64(),
                            "the client took no event for the grace period; cutting its stream"
                        );
                        self.cut_off();
                        false
                    }
                }
            }
        }
    }

    /// End the stream: the client gets what is queued, then the end.
    fn cut_off(&self) {
        self.tx.lock().expect("stream").take();
        self.cut.notify_one();
    }

    /// Resolves when the client has gone (the response was dropped) or was cut off.
    pub async fn gone(&self) {
        let Some(tx) = self.tx.lock().expect("stream").clone() else { return };
        tokio::select! {
            () = tx.closed() => {}
            () = self.cut.notified() => {}
        }
    }
}

/// A channel for one streamed request, and the response that drains it. Call it on
/// the runtime (it keeps a handle to it for the sender's waits).
pub fn channel() -> (Arc<StreamSender>, Sse<impl tokio_stream::Stream<Item = Result<SseEvent, Infallible>>>) {
    channel_with(STREAM_CAPACITY, SLOW_CLIENT_GRACE)
}

fn channel_with(
    capacity: usize,
    grace: Duration,
) -> (Arc<StreamSender>, Sse<impl tokio_stream::Stream<Item = Result<SseEvent, Infallible>>>) {
    let (tx, rx) = tmpsc::channel(capacity);
    let sender = StreamSender {
        tx: Mutex::new(Some(tx)),
        runtime: tokio::runtime::Handle::current(),
        grace,
        cut: Notify::new(),
    };
    let events = ReceiverStream::new(rx).map(|e| Ok(e.into_sse()));
    (Arc::new(sender), Sse::new(events).keep_alive(KeepAlive::default()))
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

/// What a tool call made while no streaming execute runs is told.
pub const NO_LISTENER: &str = "tool calls need a streaming execute (Accept: text/event-stream) to reach the client";

/// A stream as the sink of a session's tool calls (`crate::core::bridge`).
pub fn tool_sink(stream: Arc<StreamSender>) -> Sink {
    Arc::new(move |c: ToolCall| stream.send(StreamEvent::ToolCall { call: c.call, tool: c.tool, args: c.args }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that takes nothing: the sender waits while the channel is full, then
    /// cuts the stream; nothing beyond the channel's capacity is ever held.
    #[test]
    fn a_client_that_takes_nothing_is_cut_off_not_buffered() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let (sender, rx) = runtime.block_on(async {
            let (tx, rx) = tmpsc::channel(2);
            let sender = StreamSender {
                tx: Mutex::new(Some(tx)),
                runtime: tokio::runtime::Handle::current(),
                grace: Duration::from_millis(200),
                cut: Notify::new(),
            };
            (Arc::new(sender), rx)
        });
        let output = |n: usize| StreamEvent::Output { stream: OutputStream::Stdout, text: format!("line {n}\n") };
        let sent: Vec<bool> = std::thread::spawn({
            let sender = sender.clone();
            move || (0..1000).map(|n| sender.send(output(n))).collect()
        })
        .join()
        .unwrap();
        assert_eq!(sent.iter().filter(|s| **s).count(), 2, "only the channel's capacity was taken");
        assert!(!sent[2] && sent[3..].iter().all(|s| !s), "after the cut nothing is sent");
        // The gone() watcher fires at once for a cut stream, and the client sees the two
        // events, then the end.
        runtime.block_on(async {
            sender.gone().await;
            drop(sender);
            let mut stream = ReceiverStream::new(rx);
            assert!(stream.next().await.is_some() && stream.next().await.is_some());
            assert!(stream.next().await.is_none(), "the stream ended");
        });
    }

    /// A client that reads slowly back-pressures the sender, which loses nothing.
    #[test]
    fn a_slow_reader_gets_everything() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let (sender, mut rx) = runtime.block_on(async {
            let (tx, rx) = tmpsc::channel(2);
            let sender = StreamSender {
                tx: Mutex::new(Some(tx)),
                runtime: tokio::runtime::Handle::current(),
                grace: Duration::from_secs(30),
                cut: Notify::new(),
            };
            (sender, rx)
        });
        let writer = std::thread::spawn(move || {
            (0..50).all(|n| sender.send(StreamEvent::Output { stream: OutputStream::Stdout, text: n.to_string() }))
        });
        let got = runtime.block_on(async {
            let mut got = Vec::new();
            while let Some(StreamEvent::Output { text, .. }) = rx.recv().await {
                tokio::time::sleep(Duration::from_millis(2)).await;
                got.push(text);
            }
            got
        });
        assert!(writer.join().unwrap(), "every send succeeded");
        assert_eq!(got, (0..50).map(|n| n.to_string()).collect::<Vec<_>>());
    }
}
