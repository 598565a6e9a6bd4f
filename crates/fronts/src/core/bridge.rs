//! Host tools answered by the client, for every front that has them (the stdio
//! protocol, HTTP): a session's tool call becomes a `tool_call` event `{call, tool,
//! args}` on the stream of the execute running now, and the call waits for the
//! client's answer (`tool_result`), at most until the execute's deadline and never more
//! than [`TOOL_REPLY_TIMEOUT`]. A call made while no execute listens fails in R with
//! the front's words for why; so does every call once the session or the client is
//! gone.

use rsandbox::{Tool, ToolSpec};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest a tool call waits for the client's answer.
pub const TOOL_REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// Call ids, unique in the process: the stdio protocol's `tool_result` names no
/// session, so the call alone must find its waiter.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// A tool call for the client.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// Its id, which the answer names.
    pub call: String,
    /// The tool.
    pub tool: String,
    /// Its arguments (an object).
    pub args: Value,
}

/// The client's answer: the tool's value, or an error the R code sees as a condition.
pub type Answer = Result<Value, String>;

/// Where calls go while an execute listens: `false` back when the client is gone.
pub type Sink = Arc<dyn Fn(ToolCall) -> bool + Send + Sync>;

/// Where one session's tool calls meet its client.
pub struct ToolBridge {
    listener: Mutex<Option<(Sink, Instant)>>,
    pending: Mutex<HashMap<String, mpsc::Sender<Answer>>>,
    /// Why every call fails now (the session or the client is gone).
    closed: Mutex<Option<String>>,
    /// What a call made while nobody listens is told (the front's remedy).
    no_listener: &'static str,
    /// The tools' descriptions (to carry the session to another replica).
    specs: Mutex<Vec<ToolSpec>>,
}

/// The execute a bridge sends calls to, until dropped.
pub struct Attached<'b>(&'b ToolBridge);

impl Drop for Attached<'_> {
    fn drop(&mut self) {
        *self.0.listener.lock().expect("listener") = None;
    }
}

impl ToolBridge {
    /// A bridge whose calls made while no execute listens fail with `no_listener`.
    pub fn new(no_listener: &'static str) -> Arc<ToolBridge> {
        Arc::new(ToolBridge {
            listener: Mutex::default(),
            pending: Mutex::default(),
            closed: Mutex::default(),
            no_listener,
            specs: Mutex::default(),
        })
    }

    /// The session's tools, their handlers crossing this bridge.
    pub fn tools(self: &Arc<Self>, specs: Vec<ToolSpec>) -> Result<Vec<Tool>, String> {
        self.specs.lock().expect("specs").extend(specs.iter().cloned());
        specs
            .into_iter()
            .map(|spec| {
                let bridge = self.clone();
                let name = spec.name.clone();
                Tool::new(spec, move |args| bridge.call(&name, Value::Object(args.clone())))
            })
            .collect()
    }

    /// The descriptions of the tools this bridge serves.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.specs.lock().expect("specs").clone()
    }

    /// Send tool calls to `sink` until the guard drops; none waits past `deadline`.
    pub fn attach(&self, sink: Sink, deadline: Instant) -> Attached<'_> {
        *self.listener.lock().expect("listener") = Some((sink, deadline));
        Attached(self)
    }

    /// Whether call `call` waits for an answer here.
    pub fn waits_for(&self, call: &str) -> bool {
        self.pending.lock().expect("pending").contains_key(call)
    }

    /// Hand the client's answer to the waiting call; `false` when no call of that id waits.
    pub fn answer(&self, call: &str, answer: Answer) -> bool {
        match self.pending.lock().expect("pending").remove(call) {
            Some(waiting) => waiting.send(answer).is_ok(),
            None => false,
        }
    }

    /// Fail the waiting calls and every later one, saying `why`.
    pub fn close(&self, why: &str) {
        let mut pending = self.pending.lock().expect("pending");
        *self.closed.lock().expect("closed") = Some(why.to_string());
        for (_, waiting) in pending.drain() {
            // The call may have timed out meanwhile; then nobody waits.
            waiting.send(Err(why.to_string())).ok();
        }
    }

    fn call(&self, tool: &str, args: Value) -> Answer {
        let Some((sink, deadline)) = self.listener.lock().expect("listener").clone() else {
            return Err(self.no_listener.to_string());
        };
        let call = format!("call-{}", NEXT_CALL.fetch_add(1, Ordering::SeqCst));
        let (tx, rx) = mpsc::channel();
        {
            let mut pending = self.pending.lock().expect("pending");
            if let Some(why) = self.closed.lock().expect("closed").clone() {
                return Err(why);
            }
            pending.insert(call.clone(), tx);
        }
        if !sink(ToolCall { call: call.clone(), tool: tool.to_string(), args }) {
            self.pending.lock().expect("pending").remove(&call);
            return Err("the client is gone".into());
        }
        let wait = deadline.saturating_duration_since(Instant::now()).min(TOOL_REPLY_TIMEOUT);
        let answer = rx.recv_timeout(wait);
        self.pending.lock().expect("pending").remove(&call);
        answer.unwrap_or_else(|_| Err(format!("no tool result for {call} within {} s", wait.as_secs())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bridge_with_sink() -> (Arc<ToolBridge>, mpsc::Receiver<ToolCall>, Sink) {
        let bridge = ToolBridge::new("nobody listens");
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let sink: Sink = Arc::new(move |call| tx.lock().unwrap().send(call).is_ok());
        (bridge, rx, sink)
    }

    #[test]
    fn a_call_reaches_the_listener_and_gets_its_answer() {
        let (bridge, rx, sink) = bridge_with_sink();
        let _attached = bridge.attach(sink, Instant::now() + Duration::from_secs(30));
        let answerer = {
            let bridge = bridge.clone();
            std::thread::spawn(move || {
                let call = rx.recv().unwrap();
                assert_eq!((call.tool.as_str(), &call.args), ("add", &serde_json::json!({"a": 1})));
                assert!(bridge.waits_for(&call.call));
                assert!(bridge.answer(&call.call, Ok(Value::from(3))));
                assert!(!bridge.answer(&call.call, Ok(Value::from(4))), "answered once");
            })
        };
        assert_eq!(bridge.call("add", serde_json::json!({"a": 1})), Ok(Value::from(3)));
        answerer.join().unwrap();
    }

    #[test]
    fn without_a_listener_or_after_close_calls_fail_saying_why() {
        let (bridge, rx, sink) = bridge_with_sink();
        assert_eq!(bridge.call("t", Value::Null), Err("nobody listens".to_string()));
        let _attached = bridge.attach(sink, Instant::now() + Duration::from_secs(30));
        let closer = {
            let bridge = bridge.clone();
            std::thread::spawn(move || {
                rx.recv().unwrap();
                bridge.close("the session was closed");
            })
        };
        assert_eq!(bridge.call("t", Value::Null), Err("the session was closed".to_string()));
        closer.join().unwrap();
        assert_eq!(bridge.call("t", Value::Null), Err("the session was closed".to_string()));
    }
}
