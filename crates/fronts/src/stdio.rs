//! The stdio protocol (`rsandbox serve --stdio`): newline-delimited JSON requests in,
//! responses and events out. The one way non-Rust clients drive the engine; see
//! `docs/protocol.md` and `docs/protocol.schema.json`.
//!
//! Each request runs on its own thread, so requests on different sessions run
//! concurrently; a second execute on a busy session gets a `busy` error. Tool calls
//! from a session become `tool_call` events that the client answers with `tool_result`.
//! Every bad line gets a structured error and the server keeps serving.

use crate::core::bridge::{Sink, ToolBridge, ToolCall};
use crate::core::registry::{InUse, NewEntry};
use crate::core::{Caps, ErrorCode, Owner, Registry, ServiceError};
use crate::request::{decode_base64, decode_files, options_from, InputFile, Limits};
use rsandbox::ToolSpec;
use rsandbox::{Engine, EvalRequest, Event, ExecuteOptions};
use serde::Deserialize;
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Longest request line accepted (a `put_file` of about 12 MiB fits).
pub const MAX_LINE: usize = 16 << 20;
/// Requests in flight at once (each may hold a sandbox); more get `busy` at once.
pub const MAX_IN_FLIGHT: usize = 64;

type Out = Arc<Mutex<Box<dyn Write + Send>>>;

/// What a tool call made outside an execute is told (none can be: only code runs tools).
const NO_LISTENER: &str = "tool calls reach the client only while a session.execute runs";

/// A request line, parsed ([`parse_request`]); public for the fuzz targets only.
#[doc(hidden)]
#[derive(Debug, Deserialize)]
#[serde(tag = "op", deny_unknown_fields)]
pub enum Request {
    #[serde(rename = "eval")]
    Eval {
        id: Value,
        code: String,
        timeout: Option<f64>,
        #[serde(default)]
        limits: Limits,
        #[serde(default)]
        stream: bool,
        #[serde(default)]
        files: Vec<InputFile>,
        #[serde(default)]
        collect: Vec<String>,
        #[serde(default)]
        args: Vec<String>,
        /// Values bound before the code runs (typed encoding, `docs/protocol.md`).
        #[serde(default)]
        globals: serde_json::Map<String, Value>,
        /// Also return the value typed (`value_typed`).
        #[serde(default)]
        typed: bool,
    },
    #[serde(rename = "session.create")]
    SessionCreate {
        id: Value,
        #[serde(default)]
        tools: Vec<ToolSpec>,
        #[serde(default)]
        limits: Limits,
        restore: Option<String>,
    },
    #[serde(rename = "session.execute")]
    SessionExecute {
        id: Value,
        session: String,
        code: String,
        timeout: Option<f64>,
        max_tool_calls: Option<u32>,
        #[serde(default)]
        stream: bool,
        /// `false`: no auto-printing, the last value returned visible or not.
        echo: Option<bool>,
        #[serde(default)]
        globals: serde_json::Map<String, Value>,
        #[serde(default)]
        typed: bool,
    },
    #[serde(rename = "session.close")]
    SessionClose { id: Value, session: String },
    #[serde(rename = "session.interrupt")]
    SessionInterrupt { id: Value, session: String },
    #[serde(rename = "session.put_file")]
    SessionPutFile { id: Value, session: String, path: String, data_base64: String },
    #[serde(rename = "session.get_file")]
    SessionGetFile { id: Value, session: String, path: String },
    #[serde(rename = "session.list_files")]
    SessionListFiles { id: Value, session: String },
    #[serde(rename = "session.snapshot")]
    SessionSnapshot { id: Value, session: String },
    #[serde(rename = "tool_result")]
    ToolResult { call: String, value: Option<Value>, error: Option<String> },
    #[serde(rename = "lint")]
    Lint {
        id: Value,
        #[cfg_attr(not(feature = "lint"), allow(dead_code))]
        code: String,
    },
}

const OPS: [&str; 11] = [
    "eval",
    "session.create",
    "session.execute",
    "session.close",
    "session.interrupt",
    "session.put_file",
    "session.get_file",
    "session.list_files",
    "session.snapshot",
    "tool_result",
    "lint",
];

struct Server {
    engine: Engine,
    out: Out,
    sessions: Registry,
    /// What a request may ask for (`Caps::stdio`: a day, any memory, bounded output).
    caps: Caps,
    in_flight: std::sync::atomic::AtomicUsize,
}

/// Serve until `input` ends; every in-flight request finishes first.
pub fn serve(engine: Engine, input: impl BufRead, output: impl Write + Send + 'static) {
    let server = Arc::new(Server {
        engine,
        out: Arc::new(Mutex::new(Box::new(output))),
        sessions: Registry::new(Caps::stdio().sessions),
        caps: Caps::stdio(),
        in_flight: Default::default(),
    });
    let mut workers = Vec::new();
    let mut lines = LineReader { input, buf: Vec::new() };
    while let Some(line) = lines.next_line() {
        match line {
            Err(len) => server.error(
                &Value::Null,
                ErrorCode::LineTooLong,
                &format!("request line of {len} bytes exceeds {MAX_LINE}"),
            ),
            Ok(text) if text.trim().is_empty() => {}
            Ok(text) => {
                // Tool results are answered inline: an execute may be waiting for one.
                if is_tool_result(&text) {
                    server.handle(&text);
                    continue;
                }
                if server.in_flight.fetch_add(1, Ordering::SeqCst) >= MAX_IN_FLIGHT {
                    server.in_flight.fetch_sub(1, Ordering::SeqCst);
                    let id = serde_json::from_str::<Value>(&text)
                        .ok()
                        .and_then(|v| v.get("id").cloned())
                        .unwrap_or(Value::Null);
                    server.error(&id, ErrorCode::Busy, &format!("{MAX_IN_FLIGHT} requests are already in flight"));
                    continue;
                }
                let server = server.clone();
                workers.retain(|w: &std::thread::JoinHandle<()>| !w.is_finished());
                workers.push(std::thread::spawn(move || {
                    server.handle(&text);
                    server.in_flight.fetch_sub(1, Ordering::SeqCst);
                }));
            }
        }
    }
    // Tool calls waiting for this client, and later ones, fail at once.
    server.sessions.close_bridges("the client closed the connection");
    for w in workers {
        // A panicking request already answered nothing; the others are unaffected.
        w.join().ok();
    }
}

/// A request line as the server reads it, or the error the client gets for it: the
/// request's id (`null` when there is none), the error code and the message. Needs no
/// engine (the fuzz target `stdio_request` calls it).
pub fn parse_request(line: &str) -> Result<Request, (Value, ErrorCode, String)> {
    let raw: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return Err((Value::Null, ErrorCode::ParseError, format!("invalid JSON: {e}"))),
    };
    let id = raw.get("id").cloned().unwrap_or(Value::Null);
    match raw.get("op").and_then(Value::as_str) {
        None => return Err((id, ErrorCode::InvalidRequest, "missing \"op\"".into())),
        Some(op) if !OPS.contains(&op) => return Err((id, ErrorCode::UnknownOp, format!("unknown op {op:?}"))),
        Some(_) => {}
    }
    serde_json::from_value(raw).map_err(|e| (id, ErrorCode::InvalidRequest, e.to_string()))
}

fn is_tool_result(line: &str) -> bool {
    serde_json::from_str::<Value>(line).is_ok_and(|v| v.get("op").and_then(Value::as_str) == Some("tool_result"))
}

/// Reads lines, refusing (and skipping) those longer than [`MAX_LINE`].
struct LineReader<R> {
    input: R,
    buf: Vec<u8>,
}

impl<R: BufRead> LineReader<R> {
    /// `Some(Ok(line))`, `Some(Err(length))` for an oversized or non-UTF-8 line, `None` at EOF.
    fn next_line(&mut self) -> Option<Result<String, usize>> {
        self.buf.clear();
        let mut too_long = 0usize;
        loop {
            let chunk = match self.input.fill_buf() {
                Ok(c) => c,
                Err(_) => return None,
            };
            if chunk.is_empty() {
                return match (too_long, self.buf.is_empty()) {
                    (0, true) => None,
                    (0, false) => {
                        Some(String::from_utf8(std::mem::take(&mut self.buf)).map_err(|e| e.as_bytes().len()))
                    }
                    (n, _) => Some(Err(n)),
                };
            }
            let (part, done) = match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (&chunk[..i], Some(i + 1)),
                None => (chunk, None),
            };
            if too_long > 0 || self.buf.len() + part.len() > MAX_LINE {
                too_long = too_long.max(self.buf.len()) + part.len();
                self.buf.clear();
            } else {
                self.buf.extend_from_slice(part);
            }
            let consumed = done.unwrap_or(chunk.len());
            self.input.consume(consumed);
            if done.is_some() {
                if too_long > 0 {
                    return Some(Err(too_long));
                }
                return Some(String::from_utf8(std::mem::take(&mut self.buf)).map_err(|e| e.as_bytes().len()));
            }
        }
    }
}

impl Server {
    fn send(&self, message: Value) {
        // A client that closed stdout cannot be told anything; requests still finish.
        write_line(&self.out, &message);
    }

    fn error(&self, id: &Value, code: ErrorCode, message: &str) {
        self.send(json!({"id": id, "error": {"code": code, "message": message}}));
    }

    fn fail(&self, id: &Value, e: ServiceError) {
        self.error(id, e.code, &e.message);
    }

    fn handle(&self, line: &str) {
        let request = match parse_request(line) {
            Ok(r) => r,
            Err((id, code, message)) => return self.error(&id, code, &message),
        };
        match request {
            Request::Eval { id, code, timeout, limits, stream, files, collect, args, globals, typed } => {
                let answer = self.options(&limits, timeout).and_then(|options| {
                    let files = decode_files(files)?;
                    let mut emit = self.emitter(&id);
                    let mut request = EvalRequest::new(&code, options);
                    request.files = files;
                    request.collect = collect;
                    request.args = args;
                    request.globals = globals;
                    request.typed = typed;
                    if stream {
                        request.on_event = Some(&mut emit);
                    }
                    Ok(self.engine.eval_request(request)?)
                });
                self.reply(&id, answer.map(|result| json!({"result": result})));
            }
            Request::SessionCreate { id, tools, limits, restore } => match self.create_session(tools, &limits, restore)
            {
                Ok((sid, warnings)) if warnings.is_empty() => self.send(json!({"id": id, "session": sid})),
                Ok((sid, warnings)) => self.send(json!({"id": id, "session": sid, "warnings": warnings})),
                Err(e) => self.fail(&id, e),
            },
            Request::SessionExecute { id, session, code, timeout, max_tool_calls, stream, echo, globals, typed } => {
                let Some(s) = self.session(&id, &session) else { return };
                let defaults = ExecuteOptions::default();
                let options = match self.options(&Limits::default(), timeout) {
                    Ok(o) => ExecuteOptions {
                        timeout: o.timeout,
                        max_tool_calls: max_tool_calls.unwrap_or(defaults.max_tool_calls),
                        max_output: defaults.max_output,
                        echo: echo.unwrap_or(defaults.echo),
                        globals,
                        typed,
                    },
                    Err(e) => return self.fail(&id, e),
                };
                let executing = match s.start_execute() {
                    Ok(e) => e,
                    Err(e) => return self.fail(&id, e),
                };
                let attached = s.bridge.attach(self.tool_sink(&session), Instant::now() + options.timeout);
                let mut emit = self.emitter(&id);
                let on_event: Option<&mut dyn FnMut(Event<'_>)> = if stream { Some(&mut emit) } else { None };
                let answer = s.session().execute_streaming(&code, &options, on_event);
                // The session is free before the client hears the answer: its next
                // execute may come at once.
                drop(attached);
                drop((executing, s));
                self.reply(&id, answer.map(|result| json!({"result": result})));
            }
            Request::SessionInterrupt { id, session } => {
                let Some(s) = self.session(&id, &session) else { return };
                self.send(json!({"id": id, "interrupted": s.session().interrupt()}));
            }
            Request::SessionPutFile { id, session, path, data_base64 } => {
                let Some(s) = self.session(&id, &session) else { return };
                let answer = decode_base64(&data_base64).and_then(|data| s.session().put_file(&path, &data));
                self.reply(&id, answer.map(|size| json!({"path": path, "size": size})));
            }
            Request::SessionGetFile { id, session, path } => {
                let Some(s) = self.session(&id, &session) else { return };
                let answer = s.session().get_file(&path);
                self.reply(&id, answer.map(|f| json!({"path": f.path, "size": f.size, "data_base64": f.data_base64})));
            }
            Request::SessionListFiles { id, session } => {
                let Some(s) = self.session(&id, &session) else { return };
                let answer = s.session().list_files();
                self.reply(&id, answer.map(|(files, truncated)| json!({"files": files, "truncated": truncated})));
            }
            Request::SessionSnapshot { id, session } => {
                let Some(s) = self.session(&id, &session) else { return };
                let answer = s.session().snapshot();
                self.reply(
                    &id,
                    answer.map(|(snapshot, not_saved)| json!({"snapshot": snapshot, "not_saved": not_saved})),
                );
            }
            Request::SessionClose { id, session } => match self.sessions.remove(&Owner::local(), &session) {
                Ok(()) => self.send(json!({"id": id, "closed": true})),
                Err(e) => self.fail(&id, e),
            },
            #[cfg(feature = "lint")]
            Request::Lint { id, code } => self.send(json!({"id": id, "findings": crate::lint::lint(&code)})),
            #[cfg(not(feature = "lint"))]
            Request::Lint { id, .. } => {
                self.error(&id, ErrorCode::UnknownOp, "this build has no lint (feature `lint`)")
            }
            Request::ToolResult { call, value, error } => {
                let answer = match error {
                    Some(e) => Err(e),
                    None => Ok(value.unwrap_or(Value::Null)),
                };
                if !self.sessions.answer_call(&call, answer) {
                    self.error(&Value::Null, ErrorCode::UnknownCall, &format!("no pending tool call {call:?}"));
                }
            }
        }
    }

    /// The session named in a request, in use until dropped, or its error sent.
    fn session(&self, id: &Value, session: &str) -> Option<InUse> {
        self.sessions.acquire(&Owner::local(), session).map_err(|e| self.fail(id, e)).ok()
    }

    /// Tool calls of session `sid`, as `tool_call` lines on stdout.
    fn tool_sink(&self, sid: &str) -> Sink {
        let (out, sid) = (self.out.clone(), sid.to_string());
        Arc::new(move |c: ToolCall| {
            let event = json!({"event": "tool_call", "call": c.call, "session": sid, "tool": c.tool, "args": c.args});
            write_line(&out, &event)
        })
    }

    /// A response: the fields of `answer` with the request's id, or its error.
    fn reply(&self, id: &Value, answer: Result<Value, impl Into<ServiceError>>) {
        match answer {
            Ok(mut fields) => {
                fields["id"] = id.clone();
                self.send(fields)
            }
            Err(e) => self.fail(id, e.into()),
        }
    }

    /// Output events for request `id`, as lines on stdout.
    fn emitter<'s>(&'s self, id: &'s Value) -> impl FnMut(Event<'_>) + 's {
        move |event| match event {
            Event::Output { stream, text } => {
                self.send(json!({"event": "output", "id": id, "stream": stream, "text": text}))
            }
        }
    }

    /// The options of a request's `limits` and `timeout`, within the server's ceilings.
    fn options(&self, limits: &Limits, timeout: Option<f64>) -> Result<rsandbox::EvalOptions, ServiceError> {
        let asked_timeout = timeout.is_some() || limits.timeout.is_some();
        self.caps.bound(options_from(limits, timeout)?, limits, asked_timeout)
    }

    fn create_session(
        &self,
        specs: Vec<ToolSpec>,
        limits: &Limits,
        restore: Option<String>,
    ) -> Result<(String, Vec<String>), ServiceError> {
        let owner = Owner::local();
        self.sessions.may_open(&owner)?;
        let options = self.options(limits, None)?;
        let bridge = ToolBridge::new(NO_LISTENER);
        let tools = bridge.tools(specs).map_err(|e| ServiceError::new(ErrorCode::InvalidRequest, e))?;
        let (session, warnings) = match restore {
            None => (self.engine.session(options.clone(), tools)?, Vec::new()),
            Some(snapshot) => self.engine.restore_session(options.clone(), tools, &snapshot)?,
        };
        let sid = self.sessions.insert(&owner, NewEntry { session, bridge, options, implicit: false })?;
        Ok((sid, warnings))
    }
}

/// Write one JSON line and flush; `false` when the client is gone.
fn write_line(out: &Out, message: &Value) -> bool {
    let mut line = message.to_string();
    line.push('\n');
    let mut out = out.lock().expect("stdout");
    out.write_all(line.as_bytes()).and_then(|_| out.flush()).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_lines_are_refused_and_skipped() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\n{\"ok\":1}\n");
        let mut r = LineReader { input: &input[..], buf: Vec::new() };
        assert_eq!(r.next_line(), Some(Err(MAX_LINE + 10)));
        assert_eq!(r.next_line(), Some(Ok("{\"ok\":1}".to_string())));
        assert_eq!(r.next_line(), None);
    }

    #[test]
    fn limits_are_checked() {
        assert!(options_from(&Limits::default(), Some(-1.0)).is_err());
        let bad = Limits { memory: Some("12Q".into()), ..Limits::default() };
        assert!(options_from(&bad, None).is_err());
        assert_eq!(
            options_from(&Limits::default(), Some(2.5)).unwrap().timeout,
            std::time::Duration::from_millis(2500)
        );
    }
}
