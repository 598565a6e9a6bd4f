//! `rsandbox mcp`: a Model Context Protocol server (the official Rust SDK, `rmcp`) that
//! lets an AI agent run R in persistent, isolated sessions over the same engine as every
//! other front.
//!
//! Transports: stdio ([`serve_stdio`]) and streamable HTTP ([`serve_http`], loopback
//! unless a token file is given, see [`crate::auth`]; the accept loop, header timeout
//! and body limit of [`crate::listen`]). Over HTTP each MCP session (its
//! `Mcp-Session-Id`) is a connection with an implicit R session of its own.
//!
//! Ownership: a session belongs to the token that made it (`local` without a token
//! file, and on stdio). A handle from `new_session` works from any connection of that
//! token (what stateless clients need); a connection's implicit session only from that
//! connection. Another owner's session is reported exactly as one that never existed.
//! A connection is bound to the token that initialized it: a request bearing another
//! token (a borrowed `Mcp-Session-Id`) is refused.
//!
//! Sessions are capped per server and per connection, their memory by the server's cap,
//! and a session unused for the idle timeout is closed (a later call of its owner with
//! its handle is told so).
//!
//! Tools: `run_r` (in this connection's session, created on first use, or in a session
//! named by a handle), `new_session`, `close_session`, `reset_session`. A result is
//! what a console would have shown (bounded), one PNG image per plot, and the engine's
//! JSON result as structured content. An R error is a tool result with `isError`; a
//! timeout, limit or violation says in words what happened and whether the session kept
//! its variables. Nothing decides an outcome here: the engine's result is rendered.

use crate::core::bridge::ToolBridge;
use crate::core::registry::{InUse, NewEntry, LOCAL};
use crate::core::{Caps, ErrorCode, Owner, ServiceError, TokenNetworks};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Content, ErrorData, ServerCapabilities, ServerInfo};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use rsandbox::{Engine, EvalOptions, EvalResult, ExecuteOptions, Outcome};
use serde::Deserialize;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Characters of console text a result carries; the rest is cut, and said so.
pub const MAX_TEXT: usize = 20_000;
const DEFAULT_TIMEOUT_S: f64 = 30.0;

/// `run_r`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RunR {
    /// The R code to run. Variables persist between calls in the same session.
    pub code: String,
    /// A session handle from `new_session`. Omit it to use this connection's own session.
    pub session: Option<String>,
    /// Seconds before the code is stopped (default 30, at most 300). `timeout_s` is
    /// accepted too (its earlier name).
    #[serde(alias = "timeout_s")]
    pub timeout: Option<f64>,
    /// Values bound in the session before the code runs: name to a value in the typed
    /// encoding, e.g. `{"x": {"type": "integer", "value": [1, 2]}}` (`docs/protocol.md`,
    /// "Values"). They stay bound afterwards, as any variable.
    #[serde(default)]
    pub globals: serde_json::Map<String, serde_json::Value>,
    /// Also return the value in the typed encoding (`value_typed` in the structured
    /// content).
    #[serde(default)]
    pub typed: bool,
}

/// `new_session`'s arguments: the limits every front takes (`rsandbox::Limits`; `cpu_s`
/// is accepted for `cpu`, its earlier name here).
pub type NewSession = rsandbox::Limits;

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

/// The MCP server's ceilings: the core's [`Caps`], from [`Caps::mcp`] by default.
pub type McpConfig = Caps;

/// The token name the HTTP front's token check puts into a request's extensions.
#[derive(Clone, Debug)]
struct McpCaller(String);

/// The server behind every connection: the engine, the caps, and every session (the
/// core's registry: owners, caps, idle timeout, busy state).
struct Registry {
    engine: Engine,
    config: McpConfig,
    /// What the sandboxes lack here (said in the server's instructions), empty when
    /// every layer holds.
    missing: Vec<String>,
    sessions: crate::core::Registry,
    /// The tokens' own network allowlists (`network=` in the token file), checked.
    networks: TokenNetworks,
    next_connection: AtomicU64,
}

impl Registry {
    /// The engine's defaults within the caps.
    fn capped_defaults(&self) -> EvalOptions {
        let defaults = EvalOptions::default();
        EvalOptions {
            memory: defaults.memory.map(|m| m.min(self.config.max_memory)),
            max_output: defaults.max_output.min(self.config.max_output),
            ..defaults
        }
    }

    /// A session's options where `owner` asked for nothing: the defaults, within the
    /// caps, with the token's network allowlist.
    fn default_options(&self, owner: &Owner) -> Result<EvalOptions, ServiceError> {
        self.networks.bound(&owner.token, self.capped_defaults())
    }

    /// The options of a session `owner` asks for with `limits`: memory above the
    /// server's cap is refused (never lowered silently), a network outside the token's
    /// allowlist too.
    fn asked_options(&self, owner: &Owner, limits: &rsandbox::Limits) -> Result<EvalOptions, ServiceError> {
        let options = limits.apply(self.capped_defaults()).map_err(rsandbox::EngineError::from)?;
        let options = self.networks.bound(&owner.token, options)?;
        self.config.check(&EvalOptions { memory: None, ..options.clone() })?;
        if let Some(m) = options.memory.filter(|m| *m > self.config.max_memory) {
            return Err(ServiceError::bad_input(format!(
                "memory {} MiB is above this server's cap of {} MiB; ask for at most that",
                m >> 20,
                self.config.max_memory >> 20
            )));
        }
        options.validate().map_err(rsandbox::EngineError::from)?;
        Ok(options)
    }

    fn open(&self, owner: &Owner, options: EvalOptions, implicit: bool) -> Result<String, ServiceError> {
        self.sessions.may_open(owner)?;
        let session = self.engine.session(options.clone(), vec![])?;
        // MCP sessions have no client-answered tools: the bridge stays unused.
        let bridge = ToolBridge::new("this front has no client-answered tools");
        self.sessions.insert(owner, NewEntry { session, bridge, options, implicit })
    }
}

/// One connection (stdio, or one MCP session over HTTP): its number, the token it was
/// started with (bound at its first request) and its implicit R session, closed when
/// the connection ends.
struct Connection {
    id: u64,
    registry: Arc<Registry>,
    token: std::sync::OnceLock<String>,
    implicit: Mutex<Option<String>>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(handle) = self.implicit.lock().expect("implicit session").take() {
            self.registry.sessions.remove_any(&handle);
        }
    }
}

/// The MCP server of one connection, over the sessions of the whole server.
#[derive(Clone)]
pub struct McpServer {
    registry: Arc<Registry>,
    connection: Arc<Connection>,
}

fn internal(e: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(e.to_string(), None)
}

#[tool_router]
impl McpServer {
    /// A server over `engine` (which should keep children forked ahead: `prefork`),
    /// with the default limits; one connection.
    pub fn new(engine: Engine) -> McpServer {
        McpServer::connect(&Self::registry(engine, Caps::mcp()))
    }

    fn registry(engine: Engine, config: McpConfig) -> Arc<Registry> {
        Self::registry_with(engine, config, Vec::new(), TokenNetworks::default())
    }

    fn registry_with(
        engine: Engine,
        config: McpConfig,
        missing: Vec<String>,
        networks: TokenNetworks,
    ) -> Arc<Registry> {
        let sessions = crate::core::Registry::new(config.sessions);
        Arc::new(Registry { engine, config, missing, sessions, networks, next_connection: AtomicU64::new(1) })
    }

    /// A new connection to the server's sessions.
    fn connect(registry: &Arc<Registry>) -> McpServer {
        let id = registry.next_connection.fetch_add(1, Ordering::Relaxed);
        McpServer {
            registry: registry.clone(),
            connection: Arc::new(Connection {
                id,
                registry: registry.clone(),
                token: std::sync::OnceLock::new(),
                implicit: Mutex::default(),
            }),
        }
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = false, open_world_hint = false),
        description = "Run R code in a persistent, isolated R session and see what an R console would show: \
        printed output, messages, warnings, the error with its call, and each plot as a PNG image. \
        Variables and loaded packages persist between calls. Without `session`, this connection's own \
        session is used (created on first use). The sandbox reaches no network (only the hosts the server's \
        profile allows, where it allows some: the server's instructions name them), cannot run programs \
        (system() ends the session), sees only R and its packages, writes only its working directory, \
        and is stopped after timeout seconds (default 30, at most 300); memory is limited (2 GB unless \
        the session was created with less) and output to 16 MB. An R error is reported as an error \
        result; the session keeps its variables. Help works in the session: `?topic`, help() and example() \
        print the help text into the result; vignette() and browseURL() only say that no viewer exists. \
        Text beyond 20000 characters is cut, and the result says so."
    )]
    async fn run_r(
        &self,
        Parameters(args): Parameters<RunR>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.as_caller(&ctx, move |this, owner| this.run_r_blocking(owner, args)).await
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = false, open_world_hint = false),
        description = "Start a new isolated R session and return its handle (use it as `session` in run_r). \
        Optional limits, named as on every front: memory (e.g. \"512M\"), cpu (CPU seconds in all), nproc, nofile, fsize, disk, max_output, \
        network ({\"allow\": [hosts]}: within the hosts this server, and your token, allow; [] for none). The server caps the sessions open \
        at once (32 by default, 8 per connection) and closes a session unused for its idle timeout (15 minutes by default)."
    )]
    async fn new_session(
        &self,
        Parameters(args): Parameters<NewSession>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.as_caller(&ctx, move |this, owner| {
            let options = this.registry.asked_options(owner, &args)?;
            let id = this.registry.open(owner, options, false)?;
            let mut result = CallToolResult::success(vec![Content::text(id.clone())]);
            result.structured_content = Some(json!({"session": id}));
            Ok(result)
        })
        .await
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = true, open_world_hint = false),
        description = "Close an R session (its variables and files are gone)."
    )]
    async fn close_session(
        &self,
        Parameters(args): Parameters<SessionHandle>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.as_caller(&ctx, move |this, owner| {
            this.registry.sessions.remove(owner, &args.session)?;
            Ok(CallToolResult::success(vec![Content::text(format!("session {} closed", args.session))]))
        })
        .await
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = false, open_world_hint = false),
        description = "Interrupt the code \
        running in a session, as Ctrl-C would: that run_r call returns \"interrupted\" and the session keeps its \
        variables (code stuck in native code for 2 s more is stopped and the session reset)."
    )]
    async fn interrupt(
        &self,
        Parameters(args): Parameters<MaybeSession>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let owner = match self.owner(&ctx) {
            Ok(o) => o,
            Err(why) => return Ok(refused(why)),
        };
        let session = match self.session_for(&owner, args.session) {
            Ok(s) => s,
            Err(why) => return Ok(refused(why)),
        };
        let sent = session.session().interrupt();
        Ok(CallToolResult::success(vec![Content::text(if sent { "interrupt sent" } else { "nothing was running" })]))
    }

    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        description = "List the files in a session's \
        working directory (path and size in bytes)."
    )]
    async fn list_files(
        &self,
        Parameters(args): Parameters<MaybeSession>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.as_caller(&ctx, move |this, owner| {
            let (files, truncated) = this.session_for(owner, args.session)?.session().list_files()?;
            let mut text: String = files.iter().map(|f| format!("{}\t{}\n", f.path, f.size)).collect();
            if truncated {
                text.push_str("[more files than a listing shows]\n");
            }
            if files.is_empty() {
                text.push_str("(no files)");
            }
            let mut result = CallToolResult::success(vec![Content::text(text)]);
            result.structured_content = Some(json!({"files": files, "truncated": truncated}));
            Ok(result)
        })
        .await
    }

    #[tool(
        annotations(read_only_hint = true, open_world_hint = false),
        description = "Read a file from a session's \
        working directory: text (at most 20000 characters shown), or base64 when it is not UTF-8."
    )]
    async fn read_file(
        &self,
        Parameters(args): Parameters<FilePath>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.as_caller(&ctx, move |this, owner| {
            use base64::Engine as _;
            let file = this.session_for(owner, args.session)?.session().get_file(&args.path)?;
            let bytes = base64::engine::general_purpose::STANDARD.decode(&file.data_base64).unwrap_or_default();
            let text = match String::from_utf8(bytes) {
                Ok(t) if t.chars().count() > MAX_TEXT => {
                    let shown: String = t.chars().take(MAX_TEXT).collect();
                    format!("{shown}\n[cut: {MAX_TEXT} of {} characters shown]", t.chars().count())
                }
                Ok(t) => t,
                Err(_) => format!("(binary, {} bytes, base64)\n{}", file.size, file.data_base64),
            };
            Ok(CallToolResult::success(vec![Content::text(text)]))
        })
        .await
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = true, open_world_hint = false),
        description = "Write a \
        text file into a session's working directory (parent directories are created; an existing file is replaced)."
    )]
    async fn write_file(
        &self,
        Parameters(args): Parameters<WriteFile>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.as_caller(&ctx, move |this, owner| {
            let size = this.session_for(owner, args.session)?.session().put_file(&args.path, args.text.as_bytes())?;
            Ok(CallToolResult::success(vec![Content::text(format!("wrote {size} bytes to {}", args.path))]))
        })
        .await
    }

    #[tool(
        annotations(read_only_hint = false, destructive_hint = true, open_world_hint = false),
        description = "Reset an R session to a fresh, empty R (same handle, same limits)."
    )]
    async fn reset_session(
        &self,
        Parameters(args): Parameters<SessionHandle>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.as_caller(&ctx, move |this, owner| {
            let entry = this.registry.sessions.acquire(owner, &args.session)?;
            let fresh = this.registry.engine.session(entry.options.clone(), vec![])?;
            // The old sandbox ends here, when its last use does.
            drop(entry.replace_session(fresh));
            Ok(CallToolResult::success(vec![Content::text(format!("session {} reset", args.session))]))
        })
        .await
    }
}

impl McpServer {
    /// The session a call names, or this connection's own (created on first use),
    /// marked in use for the call.
    fn session_for(&self, owner: &Owner, handle: Option<String>) -> Result<InUse, ServiceError> {
        let handle = match handle {
            Some(h) => h,
            None => {
                let mut own = self.connection.implicit.lock().expect("implicit session");
                match own.as_ref().filter(|h| self.registry.sessions.contains(h)) {
                    Some(h) => h.clone(),
                    None => {
                        let options = self.registry.default_options(owner)?;
                        own.insert(self.registry.open(owner, options, true)?).clone()
                    }
                }
            }
        };
        self.registry.sessions.acquire(owner, &handle)
    }

    /// Who makes the call in `ctx`: the token the HTTP front checked (`local` without
    /// tokens, and on stdio) on this connection. The connection is bound to the token
    /// of its first request; a request bearing another token is refused.
    fn owner(&self, ctx: &RequestContext<RoleServer>) -> Result<Owner, ServiceError> {
        let presented = ctx
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<McpCaller>())
            .map_or_else(|| LOCAL.to_string(), |c| c.0.clone());
        let bound = self.connection.token.get_or_init(|| presented.clone());
        if *bound != presented {
            return Err(ServiceError::new(
                ErrorCode::Unauthorized,
                "this MCP session was started with another token; start your own",
            ));
        }
        Ok(Owner { token: presented, connection: self.connection.id })
    }

    fn run_r_blocking(&self, owner: &Owner, args: RunR) -> Result<CallToolResult, ServiceError> {
        let timeout = args.timeout.unwrap_or(DEFAULT_TIMEOUT_S);
        let timeout = rsandbox::limits::timeout_secs(timeout).map_err(rsandbox::EngineError::from)?;
        self.registry.config.check_timeout(timeout)?;
        let session = self.session_for(owner, args.session)?;
        let options = ExecuteOptions { timeout, globals: args.globals, typed: args.typed, ..ExecuteOptions::default() };
        let _executing = session.start_execute()?;
        Ok(render(&session.session().execute(&args.code, &options)?, &options))
    }

    /// Run `work` for the caller of `ctx` on a blocking thread (engine calls block), a
    /// refusal becoming a tool error the agent reads. A caller whose token is not the
    /// connection's is refused before anything runs.
    async fn as_caller(
        &self,
        ctx: &RequestContext<RoleServer>,
        work: impl FnOnce(&McpServer, &Owner) -> Result<CallToolResult, ServiceError> + Send + 'static,
    ) -> Result<CallToolResult, ErrorData> {
        let owner = match self.owner(ctx) {
            Ok(o) => o,
            Err(why) => return Ok(refused(why)),
        };
        let this = self.clone();
        let done = tokio::task::spawn_blocking(move || work(&this, &owner)).await.map_err(internal)?;
        Ok(done.unwrap_or_else(refused))
    }
}

/// A refusal as a tool error an agent reads: the core's words and code, with MCP's
/// remedy where a handle is unknown.
fn refused(why: ServiceError) -> CallToolResult {
    let text = match why.code {
        ErrorCode::UnknownSession => format!("{}: new_session gives a handle [{}]", why.message, why.code),
        _ => why.mcp_text(),
    };
    CallToolResult::error(vec![Content::text(text)])
}

/// A result as a model should read it: the console's text (bounded), each plot, the
/// engine's JSON; an error result for anything but `ok`.
pub fn render(r: &EvalResult, options: &ExecuteOptions) -> CallToolResult {
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
    let said = match r.outcome {
        Outcome::Ok => None,
        Outcome::Error => Some(match &r.error {
            Some(e) => match &e.call {
                Some(call) => format!("Error in {call} : {}", e.message),
                None => format!("Error: {}", e.message),
            },
            None => "Error".to_string(),
        }),
        _ => crate::core::outcome::stopped(r, options.timeout, options.max_output)
            .map(|why| format!("Stopped: {why}. {}", crate::core::outcome::kept(r))),
    };
    for said in said.iter().chain(crate::core::outcome::network_note(r).iter()) {
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
    let mut result =
        if r.outcome == Outcome::Ok { CallToolResult::success(content) } else { CallToolResult::error(content) };
    result.structured_content = serde_json::to_value(r).ok();
    result
}

/// What run_r's description says of programs under a profile without `exec`.
const NO_PROGRAMS: &str = "cannot run programs (system() ends the session)";

impl McpServer {
    /// The tools, with run_r's description telling the truth about programs under this
    /// server's profile (a `#[tool]` description is fixed at compile time).
    fn router(&self) -> ToolRouter<McpServer> {
        let mut router = Self::tool_router();
        let profile = &self.registry.engine.config().profile;
        if let (false, Some(route)) = (profile.exec.is_empty(), router.map.get_mut("run_r")) {
            if let Some(description) = &route.attr.description {
                let programs = format!(
                    "may run only the programs its {} profile lists, such as the compiler (others fail to start)",
                    profile.name
                );
                route.attr.description = Some(description.replace(NO_PROGRAMS, &programs).into());
            }
        }
        router
    }
}

#[tool_handler(router = self.router())]
impl ServerHandler for McpServer {
    /// Binds the connection to the token of its `initialize` request, then answers as
    /// the SDK does.
    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, ErrorData> {
        self.owner(&context).map_err(|why| ErrorData::invalid_request(why.message, None))?;
        context.peer.set_peer_info(request);
        Ok(self.get_info())
    }

    fn get_info(&self) -> ServerInfo {
        let profile = &self.registry.engine.config().profile;
        let programs = if profile.exec.is_empty() {
            "no programs".to_string()
        } else {
            format!("only the programs the {} profile lists, such as the compiler", profile.name)
        };
        let network = match profile.network.as_ref().filter(|n| n.is_on()) {
            Some(network) => format!("network only to {} (by the server's proxy)", network.allow.join(", ")),
            None => "no network".to_string(),
        };
        let mut instructions = format!(
            "Runs R code in isolated sandboxes ({network}, {programs}, limited memory and time). \
             Use run_r; variables persist in this connection's session. new_session gives more sessions."
        );
        if !self.registry.missing.is_empty() {
            instructions.push_str(&format!(
                " This server runs with weaker isolation than the default (the operator chose to): {}. Every \
                 result's structured content names the layers applied.",
                self.registry.missing.join("; ")
            ));
        }
        ServerInfo::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(instructions)
    }
}

/// What a sandbox lacks compared with the full lockdown, in words (empty: nothing).
pub fn missing_layers(applied: &rsandbox::Applied) -> Vec<String> {
    let mut missing = Vec::new();
    if applied.namespaces.is_empty() {
        missing.push("no namespaces (no separate network stack; sockets still cannot be made)".to_string());
    }
    if !applied.private_root {
        missing.push("no private root (host paths visible to stat, still unreadable)".to_string());
    }
    if applied.workspace_quota.is_none() {
        missing.push("no disk quota on the workspace (each file still capped)".to_string());
    }
    if applied.landlock != rsandbox::LandlockEnforcement::Full {
        missing.push(format!("Landlock {:?}", applied.landlock).to_lowercase());
    }
    if !applied.seccomp {
        missing.push("no seccomp filter".to_string());
    }
    missing
}

/// Start one sandbox before serving: an environment that cannot give the layers asked
/// for refuses here (fail closed); what an opted-in weaker mode lacks is returned.
fn verify(engine: &Engine) -> Result<Vec<String>, String> {
    engine.verify_lockdown().map(|applied| missing_layers(&applied)).map_err(|e| e.to_string())
}

/// Close idle sessions every so often, for as long as the server runs.
fn spawn_idle_reaper(registry: &Arc<Registry>) {
    let weak = Arc::downgrade(registry);
    let Some(idle_timeout) = registry.config.sessions.idle_timeout else { return };
    let every = (idle_timeout / 4).clamp(Duration::from_millis(200), Duration::from_secs(30));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(registry) = weak.upgrade() else { return };
            // Closing a session waits for its sandbox to end: off the async threads.
            if tokio::task::spawn_blocking(move || registry.sessions.close_idle()).await.is_err() {
                return;
            }
        }
    });
}

/// Serve MCP on stdin/stdout until the client closes the connection.
pub fn serve_stdio(engine: Engine, config: McpConfig) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    let missing = verify(&engine)?;
    runtime.block_on(async move {
        let registry = McpServer::registry_with(engine, config, missing, TokenNetworks::default());
        spawn_idle_reaper(&registry);
        let service =
            McpServer::connect(&registry).serve(rmcp::transport::io::stdio()).await.map_err(|e| e.to_string())?;
        service.waiting().await.map_err(|e| e.to_string())?;
        registry.engine.shutdown();
        Ok(())
    })
}

/// Serve MCP over streamable HTTP at `http://ADDR/mcp` until SIGINT or SIGTERM. Without
/// `tokens` only a loopback address is accepted; with them every request needs
/// `Authorization: Bearer TOKEN`. Connections are served by the accept loop every HTTP
/// front shares ([`crate::listen`]): the header (and keep-alive idle) timeout of
/// `connections`, bodies over [`crate::listen::MAX_BODY`] refused with 413, and the
/// grace period at the stop signal. `ready` is called with the bound address (port 0
/// picks one) once the server accepts connections.
pub fn serve_http(
    engine: Engine,
    addr: std::net::SocketAddr,
    tokens: Option<crate::auth::Tokens>,
    config: McpConfig,
    connections: crate::listen::ConnectionLimits,
    ready: impl FnOnce(std::net::SocketAddr),
) -> Result<(), String> {
    use rmcp::transport::streamable_http_server::{
        session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
    };
    crate::auth::check_bind(addr, tokens.as_ref()).map_err(|e| e.to_string())?;
    let networks =
        TokenNetworks::new(tokens.as_ref(), engine.config().profile.network.as_ref()).map_err(|e| e.to_string())?;
    let missing = verify(&engine)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    let served = runtime.block_on(async move {
        let registry = McpServer::registry_with(engine, config, missing, networks);
        spawn_idle_reaper(&registry);
        let mut http_config = StreamableHttpServerConfig::default();
        // Cancelled at SIGINT/SIGTERM: every MCP session ends, then the listener.
        let shutdown = http_config.cancellation_token.clone();
        if tokens.is_some() {
            // Reached by name from other hosts: the bearer token is the guard, not the
            // Host header (which rmcp checks against loopback names by default).
            http_config = http_config.disable_allowed_hosts();
        }
        let factory_registry = registry.clone();
        let service: StreamableHttpService<McpServer, LocalSessionManager> = StreamableHttpService::new(
            move || Ok(McpServer::connect(&factory_registry)),
            Arc::new(LocalSessionManager::default()),
            http_config,
        );
        let tokens = Arc::new(tokens);
        // Outermost first: the token check (401 before any body is read), then the
        // body limit (rmcp reads a body whole, without one).
        let router = axum::Router::new()
            .nest_service("/mcp", service)
            .fallback(|| async {
                crate::listen::json_error(
                    axum::http::StatusCode::NOT_FOUND,
                    "not_found",
                    "no such route: MCP is at /mcp",
                )
            })
            .layer(axum::middleware::from_fn(crate::listen::limit_body))
            .layer(axum::middleware::from_fn(move |request, next| {
                let tokens = tokens.clone();
                async move { authorize(&tokens, request, next).await }
            }));
        let listener =
            tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let bound = listener.local_addr().map_err(|e| e.to_string())?;
        let stop_signal = crate::shutdown::stop_signal();
        ready(bound);
        let stop = async move {
            stop_signal.await;
            shutdown.cancel();
        };
        crate::listen::run(listener, router, connections, stop).await;
        registry.engine.shutdown();
        Ok(())
    });
    // Blocking work past the grace period is not waited for.
    runtime.shutdown_timeout(Duration::from_millis(100));
    served
}

/// Every request carries a token of the file, when there is one: 401 otherwise. The
/// token's name goes into the request for the tools (sessions are the token's).
async fn authorize(
    tokens: &Option<crate::auth::Tokens>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if let Some(tokens) = tokens {
        let presented = request.headers().get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let Some(name) = presented.and_then(|h| tokens.check_bearer(h)).map(str::to_string) else {
            return (
                axum::http::StatusCode::UNAUTHORIZED,
                [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
                axum::Json(json!({"error": {"code": "unauthorized", "message": "a valid bearer token is required"}})),
            )
                .into_response();
        };
        request.extensions_mut().insert(McpCaller(name));
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_r_says_it_cannot_run_programs_in_the_words_the_router_replaces() {
        let router = McpServer::tool_router();
        let description = router.get("run_r").and_then(|t| t.description.clone()).unwrap_or_default();
        assert!(description.contains(NO_PROGRAMS), "{description}");
        assert!(description.contains("`?topic`, help() and example() print the help text"), "{description}");
    }

    /// A model reads why its download failed: after the console's text when the code went
    /// on, once (an R error's message says it already).
    #[test]
    fn a_refused_network_attempt_is_said_in_the_tool_text() {
        let view = rsandbox::child::SupervisorView { stdout: b"[1] 1\n".to_vec(), ..Default::default() };
        let mut r = rsandbox::child::compose_observed(None, view);
        r.outcome = Outcome::Ok;
        r.refused_network = true;
        let text = |r: &EvalResult| {
            let rendered = render(r, &ExecuteOptions::default());
            rendered.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<String>()
        };
        assert_eq!(text(&r), format!("[1] 1\nnetwork: {}", EvalResult::NO_NETWORK));
        r.outcome = Outcome::Error;
        r.error = Some(rsandbox::result::RError {
            message: format!("cannot open URL\nnetwork: {}", EvalResult::NO_NETWORK),
            call: None,
            ..rsandbox::result::RError::default()
        });
        assert_eq!(text(&r).matches(EvalResult::NO_NETWORK).count(), 1, "{}", text(&r));
    }
}
