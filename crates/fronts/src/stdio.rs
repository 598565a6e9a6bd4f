//! The stdio protocol (`rsandbox serve --stdio`): newline-delimited JSON requests in,
//! responses and events out. The one way non-Rust clients drive the engine; see
//! `docs/protocol.md` and `docs/protocol.schema.json`.
//!
//! Each request runs on a thread of its own (the one that read it), so requests on
//! different sessions run concurrently; a second execute on a busy session gets a
//! `busy` error. Tool calls from a session become `tool_call` events that the client
//! answers with `tool_result`.
//! Every bad line gets a structured error and the server keeps serving.

use crate::core::bridge::{Sink, ToolBridge, ToolCall};
use crate::core::error::ErrorDetail;
use crate::core::registry::{InUse, NewEntry};
use crate::core::{Caps, ErrorCode, Owner, Registry, ServiceError};
use crate::reading::{LineReader, ReadingTurn};
use crate::request::{decode_base64, decode_files, options_from, InputFile, Limits, WorkspacePath};
use rsandbox::ToolSpec;
use rsandbox::{Engine, EvalRequest, EvalResult, Event, ExecuteOptions, OutputStream};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use crate::reading::MAX_LINE;
/// Requests in flight at once (each may hold a sandbox); more get `busy` at once.
pub const MAX_IN_FLIGHT: usize = 64;

type Out = Arc<Mutex<Box<dyn Write + Send>>>;

/// What a tool call made outside an execute is told (none can be: only code runs tools).
const NO_LISTENER: &str = "tool calls reach the client only while a session.execute runs";

/// A request line, parsed ([`parse_request`]); public for the fuzz targets and the
/// schema (`$defs/request` of `docs/protocol.schema.json` is generated from it).
#[doc(hidden)]
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(tag = "op", deny_unknown_fields)]
pub enum Request {
    /// Evaluate in a fresh sandbox; no state is kept.
    #[serde(rename = "eval")]
    Eval {
        #[schemars(with = "RequestId")]
        id: Value,
        /// R code.
        code: String,
        /// Seconds of wall clock (default 30; above 0, at most 86 400 and the server's
        /// ceiling, else `bad_input`).
        #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 86400))]
        timeout: Option<f64>,
        #[serde(default)]
        limits: Limits,
        /// Send `output` events while the code runs.
        #[serde(default)]
        stream: bool,
        /// Files placed in the workspace before the code runs.
        #[serde(default)]
        files: Vec<InputFile>,
        /// Globs of workspace files returned in `result.files`.
        #[serde(default)]
        collect: Vec<String>,
        /// `commandArgs(trailingOnly = TRUE)`.
        #[serde(default)]
        args: Vec<String>,
        /// Values bound before the code runs (typed encoding, `docs/protocol.md`).
        #[serde(default)]
        #[schemars(with = "rsandbox::values::Globals")]
        globals: serde_json::Map<String, Value>,
        /// Also return the value typed (`value_typed`).
        #[serde(default)]
        typed: bool,
    },
    /// Start a session (a sandbox that keeps its R state between executes).
    #[serde(rename = "session.create")]
    SessionCreate {
        #[schemars(with = "RequestId")]
        id: Value,
        /// Host tools: R functions whose calls the client answers.
        #[serde(default)]
        tools: Vec<ToolSpec>,
        #[serde(default)]
        limits: Limits,
        /// A `session.snapshot`'s snapshot (opaque) to start from.
        restore: Option<String>,
    },
    /// Run code in a session.
    #[serde(rename = "session.execute")]
    SessionExecute {
        #[schemars(with = "RequestId")]
        id: Value,
        /// The session's id.
        session: String,
        /// R code.
        code: String,
        /// Seconds of wall clock (default 30; above 0, at most 86 400 and the server's
        /// ceiling, else `bad_input`).
        #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 86400))]
        timeout: Option<f64>,
        /// Tool calls this execute may make (default 100).
        max_tool_calls: Option<u32>,
        /// Send `output` events while the code runs.
        #[serde(default)]
        stream: bool,
        /// `false`: no auto-printing, the last value returned visible or not.
        echo: Option<bool>,
        /// Values bound in the session before the code runs (and kept).
        #[serde(default)]
        #[schemars(with = "rsandbox::values::Globals")]
        globals: serde_json::Map<String, Value>,
        /// Also return the value typed (`value_typed`).
        #[serde(default)]
        typed: bool,
    },
    /// End a session.
    #[serde(rename = "session.close")]
    SessionClose {
        #[schemars(with = "RequestId")]
        id: Value,
        session: String,
    },
    /// Stop a session's running execute, as Ctrl-C stops R.
    #[serde(rename = "session.interrupt")]
    SessionInterrupt {
        #[schemars(with = "RequestId")]
        id: Value,
        session: String,
    },
    /// Write a file into a session's workspace.
    #[serde(rename = "session.put_file")]
    SessionPutFile {
        #[schemars(with = "RequestId")]
        id: Value,
        session: String,
        #[schemars(with = "WorkspacePath")]
        path: String,
        data_base64: String,
    },
    /// Read a file of a session's workspace.
    #[serde(rename = "session.get_file")]
    SessionGetFile {
        #[schemars(with = "RequestId")]
        id: Value,
        session: String,
        #[schemars(with = "WorkspacePath")]
        path: String,
    },
    /// List a session's workspace.
    #[serde(rename = "session.list_files")]
    SessionListFiles {
        #[schemars(with = "RequestId")]
        id: Value,
        session: String,
    },
    /// Save a session's global environment.
    #[serde(rename = "session.snapshot")]
    SessionSnapshot {
        #[schemars(with = "RequestId")]
        id: Value,
        session: String,
    },
    /// Answer a `tool_call` event (no response).
    #[serde(rename = "tool_result")]
    ToolResult {
        /// The `tool_call` event's `call`.
        call: String,
        /// The tool's value (any JSON; absent: `null`).
        value: Option<Value>,
        /// An error the R code sees as a condition at the call (takes precedence over
        /// `value`).
        error: Option<String>,
    },
    /// The advisory lint's findings for some code.
    #[serde(rename = "lint")]
    Lint {
        #[schemars(with = "RequestId")]
        id: Value,
        #[cfg_attr(not(feature = "lint"), allow(dead_code))]
        code: String,
    },
}

impl Request {
    /// The id its answer carries; a `tool_result` has none (it gets no answer).
    fn id(&self) -> Option<&Value> {
        match self {
            Request::Eval { id, .. }
            | Request::SessionCreate { id, .. }
            | Request::SessionExecute { id, .. }
            | Request::SessionClose { id, .. }
            | Request::SessionInterrupt { id, .. }
            | Request::SessionPutFile { id, .. }
            | Request::SessionGetFile { id, .. }
            | Request::SessionListFiles { id, .. }
            | Request::SessionSnapshot { id, .. }
            | Request::Lint { id, .. } => Some(id),
            Request::ToolResult { .. } => None,
        }
    }
}

/// A request's `id`, for the schema: any JSON value (a number or a string, usually),
/// which the response carries back unchanged.
pub struct RequestId;

impl schemars::JsonSchema for RequestId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RequestId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Any JSON value (a number or a string, usually); the response carries it back \
                            unchanged (null when the line had none or was not JSON)."
        })
    }
}

/// A session id as the server makes it, for the schema ([`rsandbox::ids::session_id`]).
pub struct SessionId;

impl schemars::JsonSchema for SessionId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SessionId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": rsandbox::ids::SESSION_ID_PATTERN,
            "description": "s-<node>-<32 hex>: 128 random bits, and the node (--node-id, RSANDBOX_NODE_ID or \
                            the host name) a balancer routes on."
        })
    }
}

/// A line the server writes: a response (it carries its request's `id`) or an event
/// (it carries `event`). `$defs/output` of `docs/protocol.schema.json` is generated from
/// it, and the server writes nothing else.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
#[schemars(deny_unknown_fields)]
pub enum Output<'a> {
    /// Something happened while a request runs.
    Event(StdioEvent<'a>),
    /// `eval`'s and `session.execute`'s answer.
    Result {
        /// The request's id.
        #[schemars(with = "RequestId")]
        id: &'a Value,
        /// What the evaluation produced.
        result: Box<EvalResult>,
    },
    /// `session.create`'s answer.
    SessionCreated {
        /// The request's id.
        #[schemars(with = "RequestId")]
        id: &'a Value,
        /// The new session's id.
        #[schemars(with = "SessionId")]
        session: String,
        /// What R said restoring a snapshot (objects it could not restore).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        warnings: Vec<String>,
    },
    /// `session.interrupt`'s answer.
    Interrupted {
        /// The request's id.
        #[schemars(with = "RequestId")]
        id: &'a Value,
        /// Whether an execute was running (and was interrupted).
        interrupted: bool,
    },
    /// `session.put_file`'s answer.
    FileWritten {
        /// The request's id.
        #[schemars(with = "RequestId")]
        id: &'a Value,
        /// The path written.
        path: String,
        /// Bytes written.
        size: u64,
    },
    /// `session.get_file`'s answer.
    File {
        /// The request's id.
        #[schemars(with = "RequestId")]
        id: &'a Value,
        /// The file's path.
        path: String,
        /// Bytes.
        size: u64,
        /// The content, base64.
        data_base64: String,
    },
    /// `session.list_files`'s answer.
    Files {
        /// The request's id.
        #[schemars(with = "RequestId")]
        id: &'a Value,
        /// The workspace's regular files (at most 10 000).
        files: Vec<FileInfo>,
        /// More files exist than a listing carries.
        truncated: bool,
    },
    /// `session.snapshot`'s answer.
    Snapshot {
        /// The request's id.
        #[schemars(with = "RequestId")]
        id: &'a Value,
        /// The session's global environment, opaque (base64 of R's serialization).
        snapshot: String,
        /// Objects that could not be saved (connections, external pointers).
        not_saved: Vec<String>,
    },
    /// `session.close`'s answer.
    Closed {
        /// The request's id.
        #[schemars(with = "RequestId")]
        id: &'a Value,
        /// Always true.
        #[schemars(extend("const" = true))]
        closed: bool,
    },
    /// `lint`'s answer.
    #[cfg(feature = "lint")]
    Findings {
        /// The request's id.
        #[schemars(with = "RequestId")]
        id: &'a Value,
        /// The calls that deserve a reviewer's attention.
        findings: Vec<crate::lint::Finding>,
    },
    /// Any request's error; the server keeps serving.
    Error {
        /// The request's id.
        #[schemars(with = "RequestId")]
        id: &'a Value,
        /// What went wrong.
        error: ErrorDetail,
    },
}

/// An event: output while code runs, or a tool call the client must answer.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
#[schemars(deny_unknown_fields)]
pub enum StdioEvent<'a> {
    /// Output as the code produces it (the result still holds all of it).
    Output {
        /// The request that runs the code.
        #[schemars(with = "RequestId")]
        id: &'a Value,
        /// Which stream.
        stream: OutputStream,
        /// The text.
        text: &'a str,
    },
    /// A host tool was called; answer with a `tool_result` request.
    ToolCall {
        /// The call's id, which the `tool_result` names.
        call: String,
        /// The session whose code made the call.
        #[schemars(with = "SessionId")]
        session: String,
        /// The tool.
        tool: String,
        /// Its arguments (an object), checked against the tool's spec.
        #[schemars(with = "serde_json::Map<String, Value>")]
        args: Value,
    },
}

/// A file of a workspace, as a listing shows it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FileInfo {
    /// Relative to the workspace.
    pub path: String,
    /// Bytes.
    pub size: u64,
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
    in_flight: AtomicUsize,
}

/// Serve until `input` ends; every in-flight request finishes first. Fails at once,
/// serving nothing, only when the process is out of descriptors.
pub fn serve(engine: Engine, input: OwnedFd, output: impl Write + Send + 'static) -> std::io::Result<()> {
    let turn = ReadingTurn::new(input)?;
    let server = Server {
        engine,
        out: Arc::new(Mutex::new(Box::new(output))),
        sessions: Registry::new(Caps::stdio().sessions),
        caps: Caps::stdio(),
        in_flight: Default::default(),
    };
    // Every thread is joined when the scope ends: the input has ended and each request
    // under way has been answered.
    std::thread::scope(|scope| take_turns(scope, &server, &turn));
    Ok(())
}

/// One thread's part: wait for its turn (`reading`), read a request, pass the reading
/// on, run the request itself (a long evaluation never holds up another request), and
/// wait for a turn again; return when the input ends. Threads are made only when every
/// one is busy.
fn take_turns<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    server: &'scope Server,
    turn: &'scope ReadingTurn,
) {
    loop {
        let request = {
            // `None`: the input has ended, or can no longer be waited for. Either way no
            // tool result will be read any more: tool calls waiting for this client, and
            // later ones, fail at once (closing them twice changes nothing).
            let Some(mut lines) = turn.take() else {
                server.sessions.close_bridges("the client closed the connection");
                return;
            };
            let Some(request) = server.next_request(&mut lines) else {
                turn.end();
                server.sessions.close_bridges("the client closed the connection");
                return;
            };
            // This thread leaves the readers: when it was the last, a new one waits.
            if turn.readers.fetch_sub(1, Ordering::SeqCst) == 1 {
                turn.readers.fetch_add(1, Ordering::SeqCst);
                scope.spawn(move || take_turns(scope, server, turn));
            }
            turn.pass_on(&lines);
            request
            // The reader is released here: the next line is read while this request runs.
        };
        let id = request.id().cloned();
        answer_a_panic(&server.out, id.as_ref(), || server.handle(request));
        server.in_flight.fetch_sub(1, Ordering::SeqCst);
        turn.readers.fetch_add(1, Ordering::SeqCst);
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

impl Server {
    /// The next request to run on a thread of its own, answering the lines before it
    /// that need none (bad lines, tool results, interrupts, requests over
    /// [`MAX_IN_FLIGHT`]); `None` when the input ends. A request returned is counted in
    /// flight.
    fn next_request(&self, lines: &mut LineReader) -> Option<Request> {
        loop {
            let text = match lines.next_line()? {
                Err(len) => {
                    self.error(
                        &Value::Null,
                        ErrorCode::LineTooLong,
                        &format!("request line of {len} bytes exceeds {MAX_LINE}"),
                    );
                    continue;
                }
                Ok(text) if text.trim().is_empty() => continue,
                Ok(text) => text,
            };
            // Parsed once, here: a line that is no request is answered at once.
            let request = match parse_request(&text) {
                Ok(request) => request,
                Err((id, code, message)) => {
                    self.error(&id, code, &message);
                    continue;
                }
            };
            // Tool results are answered inline: an execute may be waiting for one.
            // Interrupts too: one reaches what runs when it is read, never an execute read
            // after it (on a thread of its own, it could run after that execute had
            // started, and interrupt it).
            if matches!(request, Request::ToolResult { .. } | Request::SessionInterrupt { .. }) {
                self.handle(request);
                continue;
            }
            if self.in_flight.fetch_add(1, Ordering::SeqCst) >= MAX_IN_FLIGHT {
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                let id = request.id().unwrap_or(&Value::Null);
                self.error(id, ErrorCode::Busy, &format!("{MAX_IN_FLIGHT} requests are already in flight"));
                continue;
            }
            return Some(request);
        }
    }

    fn send(&self, message: &Output<'_>) {
        // A client that closed stdout cannot be told anything; requests still finish.
        write_line(&self.out, message);
    }

    fn error(&self, id: &Value, code: ErrorCode, message: &str) {
        self.send(&Output::Error { id, error: ErrorDetail { code, message: message.to_string() } });
    }

    fn fail(&self, id: &Value, e: ServiceError) {
        self.send(&Output::Error { id, error: e.into() });
    }

    /// The answer `answer` makes, or its error.
    fn reply<'a, T>(
        &self,
        id: &'a Value,
        answer: Result<T, impl Into<ServiceError>>,
        respond: impl FnOnce(T) -> Output<'a>,
    ) {
        match answer {
            Ok(value) => self.send(&respond(value)),
            Err(e) => self.fail(id, e.into()),
        }
    }

    fn handle(&self, request: Request) {
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
                self.reply(&id, answer, |result| Output::Result { id: &id, result: Box::new(result) });
            }
            Request::SessionCreate { id, tools, limits, restore } => {
                let answer = self.create_session(tools, &limits, restore);
                self.reply(&id, answer, |(session, warnings)| Output::SessionCreated { id: &id, session, warnings });
            }
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
                self.reply(&id, answer, |result| Output::Result { id: &id, result: Box::new(result) });
            }
            Request::SessionInterrupt { id, session } => {
                let Some(s) = self.session(&id, &session) else { return };
                self.send(&Output::Interrupted { id: &id, interrupted: s.session().interrupt() });
            }
            Request::SessionPutFile { id, session, path, data_base64 } => {
                let Some(s) = self.session(&id, &session) else { return };
                let answer = decode_base64(&data_base64).and_then(|data| s.session().put_file(&path, &data));
                self.reply(&id, answer, |size| Output::FileWritten { id: &id, path, size });
            }
            Request::SessionGetFile { id, session, path } => {
                let Some(s) = self.session(&id, &session) else { return };
                let answer = s.session().get_file(&path);
                self.reply(&id, answer, |f| Output::File {
                    id: &id,
                    path: f.path,
                    size: f.size,
                    data_base64: f.data_base64,
                });
            }
            Request::SessionListFiles { id, session } => {
                let Some(s) = self.session(&id, &session) else { return };
                let answer = s.session().list_files();
                self.reply(&id, answer, |(files, truncated)| Output::Files {
                    id: &id,
                    files: files.into_iter().map(|f| FileInfo { path: f.path, size: f.size }).collect(),
                    truncated,
                });
            }
            Request::SessionSnapshot { id, session } => {
                let Some(s) = self.session(&id, &session) else { return };
                let answer = s.session().snapshot();
                self.reply(&id, answer, |(snapshot, not_saved)| Output::Snapshot { id: &id, snapshot, not_saved });
            }
            Request::SessionClose { id, session } => {
                let answer = self.sessions.remove(&Owner::local(), &session);
                self.reply(&id, answer, |()| Output::Closed { id: &id, closed: true });
            }
            #[cfg(feature = "lint")]
            Request::Lint { id, code } => self.send(&Output::Findings { id: &id, findings: crate::lint::lint(&code) }),
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
            let event = StdioEvent::ToolCall { call: c.call, session: sid.clone(), tool: c.tool, args: c.args };
            write_line(&out, &Output::Event(event))
        })
    }

    /// Output events for request `id`, as lines on stdout.
    fn emitter<'s>(&'s self, id: &'s Value) -> impl FnMut(Event<'_>) + 's {
        move |event| match event {
            Event::Output { stream, text } => self.send(&Output::Event(StdioEvent::Output { id, stream, text })),
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
/// Run `work`, the handling of the request `id`; if it panics (a bug: the panic's
/// message is on stderr), the client is told so under the request's id, as HTTP answers
/// a panicked request with a 500, and the thread and the server go on serving.
fn answer_a_panic(out: &Out, id: Option<&Value>, work: impl FnOnce()) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).is_err() {
        if let Some(id) = id {
            let error = ErrorDetail { code: ErrorCode::EngineError, message: "a worker failed: it panicked".into() };
            write_line(out, &Output::Error { id, error });
        }
    }
}

fn write_line(out: &Out, message: &Output<'_>) -> bool {
    // Only maps with string keys and finite numbers: nothing here can fail to serialize.
    let mut line = serde_json::to_string(message).expect("a stdio message serializes");
    line.push('\n');
    let mut out = out.lock().expect("stdout");
    out.write_all(line.as_bytes()).and_then(|_| out.flush()).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_that_panics_is_answered_with_an_engine_error() {
        let written = Arc::new(Mutex::new(Vec::new()));
        let out: Out = Arc::new(Mutex::new(Box::new(SharedBytes(written.clone()))));
        answer_a_panic(&out, Some(&Value::from(7)), || panic!("a bug"));
        // A tool result has no id: nothing to answer.
        answer_a_panic(&out, None, || panic!("a bug"));
        answer_a_panic(&out, Some(&Value::from(8)), || {});
        let text = String::from_utf8(written.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert_eq!(lines[0]["id"], 7);
        assert_eq!(lines[0]["error"]["code"], "engine_error");
        assert_eq!(lines[0]["error"]["message"], "a worker failed: it panicked");
    }

    /// An output the test reads back.
    struct SharedBytes(Arc<Mutex<Vec<u8>>>);

    impl Write for SharedBytes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
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
