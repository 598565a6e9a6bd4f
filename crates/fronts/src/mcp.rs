//! `rsandbox mcp`: a Model Context Protocol server (the official Rust SDK, `rmcp`) that
//! lets an AI agent run R in persistent, isolated sessions over the same engine as every
//! other front.
//!
//! Tools: `run_r` (in this connection's session, created on first use, or in a session
//! named by a handle), `new_session`, `close_session`, `reset_session`. A result is
//! what a console would have shown (bounded), one PNG image per plot, and the engine's
//! JSON result as structured content. An R error is a tool result with `isError`; a
//! timeout, limit or violation says in words what happened and whether the session kept
//! its variables. Nothing decides an outcome here: the engine's result is rendered.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Content, ErrorData, ServerCapabilities, ServerInfo};
use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use rsandbox::{Engine, EngineError, EvalOptions, EvalResult, ExecuteOptions, Outcome, Session};
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Characters of console text a result carries; the rest is cut, and said so.
pub const MAX_TEXT: usize = 20_000;
/// Sessions one server holds at once.
pub const MAX_SESSIONS: usize = 32;
/// Longest `timeout_s` a call may ask for.
pub const MAX_TIMEOUT_S: f64 = 300.0;
const DEFAULT_TIMEOUT_S: f64 = 30.0;

/// `run_r`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RunR {
    /// The R code to run. Variables persist between calls in the same session.
    pub code: String,
    /// A session handle from `new_session`. Omit it to use this connection's own session.
    pub session: Option<String>,
    /// Seconds before the code is stopped (default 30, at most 300).
    pub timeout_s: Option<f64>,
}

/// `new_session`'s arguments.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct NewSession {
    /// Memory the code may allocate, e.g. "512M" or "2G" (default 2G).
    pub memory: Option<String>,
    /// CPU seconds the session may use in all.
    pub cpu_s: Option<u64>,
}

/// A file in a session's workspace.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct FilePath {
    /// The session handle (omit for this connection's session).
    pub session: Option<String>,
    /// Relative to the session's working directory; no "..", no absolute paths.
    pub path: String,
}

/// A text file to write into a session's workspace.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WriteFile {
    /// The session handle (omit for this connection's session).
    pub session: Option<String>,
    /// Relative to the session's working directory; no "..", no absolute paths.
    pub path: String,
    /// The file's content.
    pub text: String,
}

/// An optional session handle.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct MaybeSession {
    /// The session handle (omit for this connection's session).
    pub session: Option<String>,
}

/// A session handle.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SessionHandle {
    /// The handle `new_session` returned.
    pub session: String,
}

/// Open sessions by handle, with the limits each was created with (for a reset).
type Sessions = Arc<Mutex<HashMap<String, (Arc<Session>, EvalOptions)>>>;

/// The MCP server: one engine, the sessions of this server, and this connection's own.
#[derive(Clone)]
pub struct McpServer {
    engine: Engine,
    sessions: Sessions,
    connection_session: Arc<Mutex<Option<String>>>,
}

fn internal(e: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(e.to_string(), None)
}

#[tool_router]
impl McpServer {
    /// A server over `engine` (which should keep children forked ahead: `prefork`).
    pub fn new(engine: Engine) -> McpServer {
        McpServer {
            engine,
            sessions: Arc::default(),
            connection_session: Arc::default(),
        }
    }

    #[tool(annotations(read_only_hint = false, destructive_hint = false, open_world_hint = false), description = "Run R code in a persistent, isolated R session and see what an R console would show: \
        printed output, messages, warnings, the error with its call, and each plot as a PNG image. \
        Variables and loaded packages persist between calls. Without `session`, this connection's own \
        session is used (created on first use). The sandbox has no network, cannot run programs \
        (system() ends the session), sees only R and its packages, writes only its working directory, \
        and is stopped after timeout_s seconds (default 30, at most 300); memory is limited (2 GB unless \
        the session was created with less) and output to 16 MB. An R error is reported as an error \
        result; the session keeps its variables. Text beyond 20000 characters is cut, and the result says so.")]
    async fn run_r(&self, Parameters(args): Parameters<RunR>) -> Result<CallToolResult, ErrorData> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.run_r_blocking(args)).await.map_err(internal)?
    }

    #[tool(annotations(read_only_hint = false, destructive_hint = false, open_world_hint = false), description = "Start a new isolated R session and return its handle (use it as `session` in run_r). \
        Optional limits: memory (e.g. \"512M\"), cpu_s (CPU seconds in all). At most 32 sessions at once.")]
    async fn new_session(&self, Parameters(args): Parameters<NewSession>) -> Result<CallToolResult, ErrorData> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let options = EvalOptions {
                memory: match args.memory.as_deref().map(rsandbox::parse_size).transpose() {
                    Ok(m) => m.or(EvalOptions::default().memory),
                    Err(e) => return Ok(CallToolResult::error(vec![Content::text(format!("invalid memory: {e}"))])),
                },
                cpu_seconds: args.cpu_s,
                ..EvalOptions::default()
            };
            match this.open_session(options) {
                Ok(id) => {
                    let mut result = CallToolResult::success(vec![Content::text(id.clone())]);
                    result.structured_content = Some(json!({"session": id}));
                    Ok(result)
                }
                Err(why) => Ok(CallToolResult::error(vec![Content::text(why)])),
            }
        })
        .await
        .map_err(internal)?
    }

    #[tool(annotations(read_only_hint = false, destructive_hint = true, open_world_hint = false), description = "Close an R session (its variables and files are gone).")]
    async fn close_session(&self, Parameters(args): Parameters<SessionHandle>) -> Result<CallToolResult, ErrorData> {
        let removed = self.sessions.lock().expect("sessions").remove(&args.session);
        Ok(match removed {
            Some(_) => CallToolResult::success(vec![Content::text(format!("session {} closed", args.session))]),
            None => CallToolResult::error(vec![Content::text(format!("no session {:?}", args.session))]),
        })
    }

    #[tool(annotations(read_only_hint = false, destructive_hint = false, open_world_hint = false), description = "Interrupt the code \
        running in a session, as Ctrl-C would: that run_r call returns \"interrupted\" and the session keeps its \
        variables (code stuck in native code for 2 s more is stopped and the session reset).")]
    async fn interrupt(&self, Parameters(args): Parameters<MaybeSession>) -> Result<CallToolResult, ErrorData> {
        let session = match self.session_for(args.session) {
            Ok(s) => s,
            Err(why) => return Ok(CallToolResult::error(vec![Content::text(why)])),
        };
        let sent = session.interrupt();
        Ok(CallToolResult::success(vec![Content::text(if sent { "interrupt sent" } else { "nothing was running" })]))
    }

    #[tool(annotations(read_only_hint = true, open_world_hint = false), description = "List the files in a session's \
        working directory (path and size in bytes).")]
    async fn list_files(&self, Parameters(args): Parameters<MaybeSession>) -> Result<CallToolResult, ErrorData> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let listed = this.session_for(args.session).and_then(|s| s.list_files().map_err(|e| e.to_string()));
            Ok(match listed {
                Ok((files, truncated)) => {
                    let mut text: String = files.iter().map(|f| format!("{}\t{}\n", f.path, f.size)).collect();
                    if truncated {
                        text.push_str("[more files than a listing shows]\n");
                    }
                    if files.is_empty() {
                        text.push_str("(no files)");
                    }
                    let mut result = CallToolResult::success(vec![Content::text(text)]);
                    result.structured_content = Some(json!({"files": files, "truncated": truncated}));
                    result
                }
                Err(why) => CallToolResult::error(vec![Content::text(why)]),
            })
        })
        .await
        .map_err(internal)?
    }

    #[tool(annotations(read_only_hint = true, open_world_hint = false), description = "Read a file from a session's \
        working directory: text (at most 20000 characters shown), or base64 when it is not UTF-8.")]
    async fn read_file(&self, Parameters(args): Parameters<FilePath>) -> Result<CallToolResult, ErrorData> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let read = this.session_for(args.session).and_then(|s| s.get_file(&args.path).map_err(|e| e.to_string()));
            Ok(match read {
                Ok(file) => {
                    use base64::Engine as _;
                    let bytes = base64::engine::general_purpose::STANDARD.decode(&file.data_base64).unwrap_or_default();
                    let text = match String::from_utf8(bytes) {
                        Ok(t) if t.chars().count() > MAX_TEXT => {
                            let shown: String = t.chars().take(MAX_TEXT).collect();
                            format!("{shown}\n[cut: {MAX_TEXT} of {} characters shown]", t.chars().count())
                        }
                        Ok(t) => t,
                        Err(_) => format!("(binary, {} bytes, base64)\n{}", file.size, file.data_base64),
                    };
                    CallToolResult::success(vec![Content::text(text)])
                }
                Err(why) => CallToolResult::error(vec![Content::text(why)]),
            })
        })
        .await
        .map_err(internal)?
    }

    #[tool(annotations(read_only_hint = false, destructive_hint = true, open_world_hint = false), description = "Write a \
        text file into a session's working directory (parent directories are created; an existing file is replaced).")]
    async fn write_file(&self, Parameters(args): Parameters<WriteFile>) -> Result<CallToolResult, ErrorData> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let written = this.session_for(args.session).and_then(|s| s.put_file(&args.path, args.text.as_bytes()).map_err(|e| e.to_string()));
            Ok(match written {
                Ok(size) => CallToolResult::success(vec![Content::text(format!("wrote {size} bytes to {}", args.path))]),
                Err(why) => CallToolResult::error(vec![Content::text(why)]),
            })
        })
        .await
        .map_err(internal)?
    }

    #[tool(annotations(read_only_hint = false, destructive_hint = true, open_world_hint = false), description = "Reset an R session to a fresh, empty R (same handle, same limits).")]
    async fn reset_session(&self, Parameters(args): Parameters<SessionHandle>) -> Result<CallToolResult, ErrorData> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let options = this.sessions.lock().expect("sessions").get(&args.session).map(|(_, o)| o.clone());
            let Some(options) = options else {
                return Ok(CallToolResult::error(vec![Content::text(format!("no session {:?}", args.session))]));
            };
            match this.engine.session(options.clone(), vec![]) {
                Ok(fresh) => {
                    this.sessions.lock().expect("sessions").insert(args.session.clone(), (Arc::new(fresh), options));
                    Ok(CallToolResult::success(vec![Content::text(format!("session {} reset", args.session))]))
                }
                Err(e) => Ok(CallToolResult::error(vec![Content::text(e.to_string())])),
            }
        })
        .await
        .map_err(internal)?
    }
}

impl McpServer {
    fn open_session(&self, options: EvalOptions) -> Result<String, String> {
        if self.sessions.lock().expect("sessions").len() >= MAX_SESSIONS {
            return Err(format!("{MAX_SESSIONS} sessions are open; close one first"));
        }
        let session = self.engine.session(options.clone(), vec![]).map_err(|e| e.to_string())?;
        let id = session.id().to_string();
        self.sessions.lock().expect("sessions").insert(id.clone(), (Arc::new(session), options));
        Ok(id)
    }

    /// The session a call names, or this connection's own (created on first use).
    fn session_for(&self, handle: Option<String>) -> Result<Arc<Session>, String> {
        let handle = match handle {
            Some(h) => h,
            None => {
                let mut own = self.connection_session.lock().expect("connection session");
                match own.as_ref().filter(|h| self.sessions.lock().expect("sessions").contains_key(*h)) {
                    Some(h) => h.clone(),
                    None => own.insert(self.open_session(EvalOptions::default())?).clone(),
                }
            }
        };
        match self.sessions.lock().expect("sessions").get(&handle) {
            Some((session, _)) => Ok(session.clone()),
            None => Err(format!("no session {handle:?} (it was closed, or never existed: new_session gives a handle)")),
        }
    }

    fn run_r_blocking(&self, args: RunR) -> Result<CallToolResult, ErrorData> {
        let timeout = args.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
        if !(timeout.is_finite() && timeout > 0.0 && timeout <= MAX_TIMEOUT_S) {
            return Ok(CallToolResult::error(vec![Content::text(format!(
                "timeout_s must be above 0 and at most {MAX_TIMEOUT_S}"
            ))]));
        }
        let session = match self.session_for(args.session) {
            Ok(s) => s,
            Err(why) => return Ok(CallToolResult::error(vec![Content::text(why)])),
        };
        let options = ExecuteOptions { timeout: Duration::from_secs_f64(timeout), ..ExecuteOptions::default() };
        match session.execute(&args.code, &options) {
            Ok(result) => Ok(render(&result, timeout)),
            Err(EngineError::Busy(_)) => Ok(CallToolResult::error(vec![Content::text(
                "this session is still running an earlier call; wait for it, or use another session",
            )])),
            Err(e @ EngineError::Input(_)) => Ok(CallToolResult::error(vec![Content::text(e.to_string())])),
            Err(e) => Err(internal(e)),
        }
    }
}

/// A result as a model should read it: the console's text (bounded), each plot, the
/// engine's JSON; an error result for anything but `ok`.
pub fn render(r: &EvalResult, timeout_s: f64) -> CallToolResult {
    let mut text = String::new();
    text.push_str(&r.stdout);
    text.push_str(&r.stderr);
    for m in &r.messages {
        text.push_str(m);
    }
    for w in &r.warnings {
        match &w.call {
            Some(call) => text.push_str(&format!("Warning message:\nIn {call} : {}\n", w.message)),
            None => text.push_str(&format!("Warning message:\n{}\n", w.message)),
        }
    }
    let kept = if r.reset {
        "The session was reset: its variables are gone; the next call starts from a fresh R."
    } else {
        "The session kept its variables."
    };
    let said = match r.outcome {
        Outcome::Ok => None,
        Outcome::Error => Some(match &r.error {
            Some(e) => match &e.call {
                Some(call) => format!("Error in {call} : {}", e.message),
                None => format!("Error: {}", e.message),
            },
            None => "Error".to_string(),
        }),
        Outcome::Timeout => Some(format!("Stopped: the code ran past its time limit of {timeout_s} s. {kept}")),
        Outcome::Interrupted => Some(format!("Stopped: the code was interrupted. {kept}")),
        Outcome::Violation => Some(format!(
            "Stopped: the code made a forbidden system call ({}); the sandbox cannot run programs or reach the \
             network. {kept}",
            r.violation.as_ref().map_or("unknown", |v| v.syscall.as_str())
        )),
        Outcome::MemoryLimit => Some(format!("Stopped: the memory limit was reached. {kept}")),
        Outcome::CpuLimit => Some(format!("Stopped: the CPU time limit was reached. {kept}")),
        Outcome::OutputLimit => Some(format!("Stopped: the code printed more than the output limit. {kept}")),
        Outcome::FileSizeLimit => Some(format!("Stopped: a file grew past the file size limit. {kept}")),
        Outcome::ProcessLimit => Some(format!("Stopped: the process limit was reached. {kept}")),
        Outcome::Crashed => Some(format!(
            "Stopped: the R process crashed ({}). {kept}",
            r.error.as_ref().map_or("no detail", |e| e.message.as_str())
        )),
    };
    if let Some(said) = &said {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(said);
    }
    let total = text.chars().count();
    if total > MAX_TEXT {
        text = text.chars().take(MAX_TEXT).collect();
        text.push_str(&format!(
            "\n[output cut: {MAX_TEXT} of {total} characters shown; the whole result is in the structured \
             content, or write it to a file in the session and read parts of it]"
        ));
    }
    if text.is_empty() {
        text.push_str("(no output)");
    }
    let mut content = vec![Content::text(text)];
    content.extend(r.plots.iter().map(|p| Content::image(p.data_base64.clone(), "image/png")));
    let mut result = if r.outcome == Outcome::Ok { CallToolResult::success(content) } else { CallToolResult::error(content) };
    result.structured_content = serde_json::to_value(r).ok();
    result
}

#[tool_handler]
impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerInfo {
        ServerInfo::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "Runs R code in isolated sandboxes (no network, no programs, limited memory and time). \
             Use run_r; variables persist in this connection's session. new_session gives more sessions.",
        )
    }
}

/// Serve MCP on stdin/stdout until the client closes the connection.
pub fn serve_stdio(engine: Engine) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let service = McpServer::new(engine).serve(rmcp::transport::io::stdio()).await.map_err(|e| e.to_string())?;
        service.waiting().await.map_err(|e| e.to_string())?;
        Ok(())
    })
}
