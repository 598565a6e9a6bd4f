//! `rsandbox`: run untrusted R code (or any program) inside kernel-enforced isolation.
//!
//! Exit status: 0 ok, 1 R error, 2 bad input (nothing ran), 3 timeout, 4 CPU limit,
//! 5 memory limit, 6 output limit, 7 file-size limit, 8 process limit, 9 violation,
//! 10 crashed, 11 the sandbox could not be set up (fail closed).
//!
//! Two binaries share this command line. `rsandbox` runs the commands that end when
//! their work does (`eval`, `run`, `exec`, `check`, `lint`, `learn`, `daemon --stop`)
//! and hands the long-running fronts (`serve`, `mcp`, the daemon's server) to
//! `rsandbox-server` beside it, which runs every command. The split is for start-up
//! time: every `rsandbox` command, `exec -- /bin/true` above all (bench P6), pays for
//! loading its binary, and the servers' HTTP and MCP stacks were most of it (issue #26;
//! see [`rsandbox_main`]).

/// `println!` that returns the write's error (a closed pipe is an error to report
/// quietly, not a panic).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)?
    }};
}

/// `print!`, returning the write's error as [`out!`] does.
macro_rules! out_no_newline {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout(), $($arg)*)?
    }};
}

mod daemon;
mod evaluate;
mod shard;
mod terminal;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use fronts::core::ErrorCode;
use rsandbox::profile::Profile;
use rsandbox::{parse_size, EngineConfig, EngineError, EvalOptions, EvalResult, Outcome};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Bad input: nothing was started (the exit status of `ErrorCode::BadInput`).
pub(crate) const EXIT_BAD_INPUT: u8 = fronts::core::error::EXIT_BAD_INPUT;
/// The sandbox could not be set up, or the engine failed.
pub(crate) const EXIT_SETUP_FAILED: u8 = fronts::core::error::EXIT_SETUP_FAILED;

/// `--version`: the release, and the C library this command was built against (the
/// release build's is musl's, `scripts/build-release.sh`: glibc's start-up probes the CPU's
/// caches with `cpuid`, which a virtual machine traps, ~0.5 ms of every command on Intel).
#[cfg(target_env = "musl")]
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (musl)");
#[cfg(not(target_env = "musl"))]
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (glibc)");

#[derive(Parser)]
#[command(name = "rsandbox", version = VERSION, about = "Run untrusted R code inside kernel-enforced isolation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
// Each subcommand's arguments are built only when it is the one invoked (or for help):
// building every subcommand's ~30 documented arguments was ~0.25 ms of each command's
// start (`rsandbox exec -- /bin/true`, a CLI `eval` through the daemon), issue #26.
#[command(defer = true)]
enum Command {
    /// Evaluate R code given on the command line.
    Eval {
        /// The R code.
        code: String,
        #[command(flatten)]
        limits: LimitArgs,
        #[command(flatten)]
        engine: EngineArgs,
        #[command(flatten)]
        io: evaluate::IoArgs,
        /// Print one JSON object instead of Rscript-like output.
        #[arg(long)]
        json: bool,
    },
    /// Evaluate an R file (`-` reads standard input), or many: with several files, a
    /// directory (its `*.R` files) or `--jobs`, each file runs in its own fresh sandbox,
    /// N at a time, with one summary (or JSON) line per file.
    Run {
        /// The file(s) or directories.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// `commandArgs(trailingOnly = TRUE)` inside, as with `Rscript FILE ARGS…`.
        #[arg(last = true)]
        args: Vec<String>,
        /// Sandboxes at once for a batch (default: one per core).
        #[arg(long)]
        jobs: Option<usize>,
        /// Run only the K-th of M parts of the batch (round-robin over the files in order;
        /// every file is in exactly one part), e.g. one part per Slurm array task.
        #[arg(long, value_name = "K/M")]
        shard: Option<shard::Shard>,
        #[command(flatten)]
        limits: LimitArgs,
        #[command(flatten)]
        engine: EngineArgs,
        #[command(flatten)]
        io: evaluate::IoArgs,
        /// Print JSON (one object; one line per file for a batch).
        #[arg(long)]
        json: bool,
    },
    /// Run any program under the same lockdown (it may execute itself only).
    Exec {
        #[command(flatten)]
        limits: LimitArgs,
        #[command(flatten)]
        engine: EngineArgs,
        /// Print a JSON report on stderr when the program ends.
        #[arg(long)]
        json: bool,
        /// The program and its arguments.
        #[arg(required = true, last = true)]
        command: Vec<String>,
    },
    /// Serve the stdio protocol: JSON requests on stdin, responses and events on stdout
    /// (docs/protocol.md).
    #[command(group(clap::ArgGroup::new("transport").required(true).args(["stdio", "http"])))]
    Serve {
        /// Read requests from standard input (docs/protocol.md).
        #[arg(long)]
        stdio: bool,
        /// Serve the HTTP API at ADDR:PORT (JSON; /openapi.json describes it). Only
        /// loopback without --token-file; port 0 picks one (printed on stderr).
        #[arg(long, value_name = "ADDR:PORT")]
        http: Option<std::net::SocketAddr>,
        /// Bearer tokens for --http, one NAME:TOKEN per line, file mode 0600.
        #[arg(long, requires = "http")]
        token_file: Option<PathBuf>,
        #[command(flatten)]
        caps: HttpCapArgs,
        /// Children kept forked and locked down ahead of requests, per limit set in use
        /// (default: one per core).
        #[arg(long)]
        prefork: Option<usize>,
        #[command(flatten)]
        node: NodeArg,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Report calls that deserve a reviewer's attention (advisory; nothing is run).
    Lint {
        /// The R file (`-` reads standard input).
        file: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// A Model Context Protocol server for AI agents: on stdin/stdout, or over
    /// streamable HTTP with --http. Tools: run_r, new_session, close_session,
    /// reset_session, interrupt, list_files, read_file, write_file.
    Mcp {
        /// Serve streamable HTTP at http://ADDR:PORT/mcp instead of stdio (port 0 picks
        /// one; the address is printed on stderr). Only loopback without --token-file.
        #[arg(long, value_name = "ADDR:PORT")]
        http: Option<std::net::SocketAddr>,
        /// Bearer tokens, one NAME:TOKEN per line, file mode 0600: every HTTP request
        /// must carry one (required for a non-loopback address).
        #[arg(long, requires = "http")]
        token_file: Option<PathBuf>,
        /// Sessions open at once on the server.
        #[arg(long, default_value_t = fronts::core::Caps::mcp().sessions.max_sessions.unwrap_or(1))]
        max_sessions: usize,
        /// Sessions open at once per connection (its own included).
        #[arg(long, default_value_t = fronts::core::Caps::mcp().sessions.max_sessions_per_connection.unwrap_or(1))]
        max_sessions_per_connection: usize,
        /// Seconds a session may go unused before it is closed.
        #[arg(long, default_value_t = fronts::core::Caps::mcp().sessions.idle_timeout.map_or(1.0, |t| t.as_secs_f64()))]
        idle_timeout: f64,
        /// Most memory a session may ask for (new_session's memory; e.g. 4G).
        #[arg(long, default_value = "4G")]
        max_memory: String,
        /// Seconds a client has to send a request's headers; also how long a kept-alive
        /// connection may sit idle (--http).
        #[arg(long, default_value_t = 30, requires = "http")]
        header_timeout: u64,
        /// Seconds running requests get to finish after SIGTERM (--http).
        #[arg(long, default_value_t = 30, requires = "http")]
        shutdown_grace: u64,
        /// Children kept forked and locked down ahead of requests (default: one per core).
        #[arg(long)]
        prefork: Option<usize>,
        #[command(flatten)]
        node: NodeArg,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// The per-user daemon that `eval` and `run` reuse (started by them on first use;
    /// it exits after `RSANDBOX_DAEMON_IDLE` seconds without requests, default 600).
    Daemon {
        /// Stop every daemon of this user.
        #[arg(long)]
        stop: bool,
        /// Serve as the daemon of this name (set by `eval`/`run` when they start one).
        #[arg(long, hide = true, conflicts_with = "stop")]
        name: Option<String>,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Run trusted code and print a profile (TOML, on stdout) that lets it run, learned
    /// from what the kernel refused it: the host files it read and wrote, the programs
    /// it ran, the R libraries and packages it used, the forbidden calls it made (no
    /// profile grants those: exit 1), and limits with headroom; notes on stderr.
    /// Nothing is written anywhere: `rsandbox learn job.R > job.toml`, then
    /// `rsandbox run --profile job.toml job.R`.
    Learn {
        /// The R file.
        file: PathBuf,
        #[command(flatten)]
        limits: LimitArgs,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Show which isolation layers this machine offers and which rsandbox applies.
    Check {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        engine: EngineArgs,
    },
}

#[derive(Args, Clone)]
pub(crate) struct LimitArgs {
    /// Wall-clock limit: seconds (fractions allowed) or with a unit (500ms, 1.5s, 2m);
    /// default 30, or the profile's.
    #[arg(long, allow_hyphen_values = true)]
    timeout: Option<String>,
    /// CPU-time limit in seconds.
    #[arg(long)]
    cpu: Option<u64>,
    /// Memory the code may allocate (e.g. 512M, 2G).
    #[arg(long)]
    memory: Option<String>,
    /// Largest file the code may write (e.g. 10M).
    #[arg(long)]
    fsize: Option<String>,
    /// Disk quota: the workspace is a private tmpfs of this size (e.g. 100M).
    #[arg(long)]
    disk: Option<String>,
    /// Processes the sandbox may run at once.
    #[arg(long)]
    nproc: Option<u64>,
    /// Open files.
    #[arg(long)]
    nofile: Option<u64>,
    /// Largest stdout + stderr + result accepted (e.g. 1M).
    #[arg(long)]
    max_output: Option<String>,
}

// The node tag in session and job ids (for a load balancer's routing).
#[derive(Args, Clone)]
pub(crate) struct NodeArg {
    /// The node tag in session and job ids (`s-NODE-…`), 1-32 characters of a-z, 0-9
    /// and '-' (default: RSANDBOX_NODE_ID, else the host name, sanitized).
    #[arg(long, value_name = "TAG")]
    node_id: Option<String>,
}

impl NodeArg {
    /// Fix the node tag before anything is served; a bad one is bad input (exit 2).
    fn apply(&self) -> Result<(), u8> {
        let chosen = match &self.node_id {
            Some(tag) => Some(tag.clone()),
            None => rsandbox::ids::node_from_env().map_err(|e| {
                eprintln!("rsandbox: RSANDBOX_NODE_ID: {e}");
                EXIT_BAD_INPUT
            })?,
        };
        if let Some(tag) = chosen {
            rsandbox::ids::set_node(&tag).map_err(|e| {
                eprintln!("rsandbox: --node-id: {e}");
                EXIT_BAD_INPUT
            })?;
        }
        Ok(())
    }
}

// Server-side caps of `serve --http`.
#[derive(Args, Clone)]
pub(crate) struct HttpCapArgs {
    /// Longest timeout a request may ask for, seconds.
    #[arg(long, default_value_t = 300, requires = "http")]
    max_timeout: u64,
    /// Most memory a request may ask for (e.g. 4G).
    #[arg(long, default_value = "4G", requires = "http")]
    max_memory: String,
    /// Requests one token may have in flight at once (more get 429).
    #[arg(long, default_value_t = 16, requires = "http")]
    max_in_flight_per_token: usize,
    /// Sessions one token may hold at once (more get 409).
    #[arg(long, default_value_t = 16, requires = "http")]
    max_sessions_per_token: usize,
    /// Requests one token may make per minute (more get 429 with Retry-After).
    #[arg(long, default_value_t = 1200, requires = "http")]
    max_requests_per_minute_per_token: u32,
    /// Seconds a finished job's result is kept.
    #[arg(long, default_value_t = 600, requires = "http")]
    job_retention: u64,
    /// Seconds a client has to send a request's headers; also how long a kept-alive
    /// connection may sit idle.
    #[arg(long, default_value_t = 30, requires = "http")]
    header_timeout: u64,
    /// Seconds running requests get to finish after SIGTERM before their sandboxes end.
    #[arg(long, default_value_t = 30, requires = "http")]
    shutdown_grace: u64,
    /// Log lines on stderr: `json` (one object per line) or `text`.
    #[arg(long, default_value = "json", value_parser = ["json", "text"], requires = "http")]
    log_format: String,
    /// A directory the replicas share: at SIGTERM, once running requests are done, each
    /// live session is saved there, and a replica later asked for it restores it.
    #[arg(long, value_name = "DIR", requires = "http")]
    snapshot_dir: Option<PathBuf>,
}

impl HttpCapArgs {
    fn caps(&self) -> Result<fronts::core::Caps, rsandbox::InputError> {
        let defaults = fronts::core::Caps::default();
        Ok(fronts::core::Caps {
            max_timeout: Duration::from_secs(self.max_timeout),
            max_memory: parse_size(&self.max_memory)?,
            max_in_flight_per_token: self.max_in_flight_per_token.max(1),
            sessions: fronts::core::SessionCaps {
                max_sessions_per_token: Some(self.max_sessions_per_token.max(1)),
                ..defaults.sessions
            },
            max_requests_per_minute_per_token: self.max_requests_per_minute_per_token.max(1),
            job_retention: Duration::from_secs(self.job_retention),
            ..defaults
        })
    }

    fn connections(&self) -> fronts::http::ConnectionLimits {
        fronts::http::ConnectionLimits {
            header_timeout: Duration::from_secs(self.header_timeout.max(1)),
            shutdown_grace: Duration::from_secs(self.shutdown_grace),
        }
    }

    /// Structured logs on stderr (`RUST_LOG`-free: info and above).
    fn start_logging(&self) {
        // A log line that cannot be written (stderr closed) is dropped: the default would
        // report it with eprintln!, which panics the request on a closed stderr.
        let builder = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_max_level(tracing::Level::INFO)
            .with_target(false)
            .log_internal_errors(false);
        // A subscriber set already (a library caller's) is kept.
        let _ = if self.log_format == "json" {
            builder.json().flatten_event(true).with_current_span(true).with_span_list(false).try_init()
        } else {
            builder.with_ansi(false).try_init()
        };
    }
}

#[derive(Args, Clone)]
pub(crate) struct EngineArgs {
    /// Packages to load once in the zygote, comma-separated.
    #[arg(long, value_delimiter = ',')]
    preload: Vec<String>,
    /// Run with whatever layers the kernel offers instead of refusing.
    #[arg(long)]
    best_effort: bool,
    /// Do not create namespaces.
    #[arg(long)]
    no_namespaces: bool,
    /// Append audit records (JSONL, created 0600) to this file.
    #[arg(long)]
    audit_log: Option<PathBuf>,
    /// `eval`/`run`: start R for this call only; neither use nor start the per-user
    /// daemon (also `RSANDBOX_NO_DAEMON=1`).
    #[arg(long)]
    pub(crate) no_daemon: bool,
    /// The policy profile: a built-in one (`strict`, the default; `base`; `compile`) or
    /// a TOML file (read and write paths, programs, a package allowlist, a function
    /// allowlist, limits, preload; see the README).
    #[arg(long, value_name = "NAME|FILE", value_parser = load_profile)]
    profile: Option<Profile>,
    /// Hosts the sandboxes may reach through the supervisor's proxy (`cran.test`,
    /// `*.r-universe.dev`, `api.example.com:8443`; port 443 unless given), added to the
    /// profile's `[network] allow`: on a server, the ceiling a request may narrow.
    #[arg(long, value_name = "HOST", value_delimiter = ',', value_parser = allow_rule)]
    network_allow: Vec<String>,
    /// As root: run every sandbox as this uid (default: a fresh uid per sandbox, which
    /// keeps process limits per sandbox). Refused: 0, and a login account's uid unless
    /// --allow-login-uid.
    #[arg(long)]
    uid: Option<u32>,
    /// With --uid: the gid (default: the uid).
    #[arg(long, requires = "uid")]
    gid: Option<u32>,
    /// With --uid: accept the uid of a login account (the sandbox then shares its
    /// processes, files it may reach and limits).
    #[arg(long, requires = "uid")]
    allow_login_uid: bool,
    /// Scheduling priority of the sandboxes (nice, -20..19; below 0 needs root).
    #[arg(long, allow_negative_numbers = true, value_parser = clap::value_parser!(i32).range(-20..=19))]
    nice: Option<i32>,
}

fn load_profile(text: &str) -> Result<Profile, String> {
    Profile::load(text).map_err(|e| e.to_string())
}

/// One `--network-allow` entry, checked as a profile's would be.
fn allow_rule(text: &str) -> Result<String, String> {
    let network = rsandbox::Network { allow: vec![text.to_string()], ..rsandbox::Network::default() };
    network.policy().map(|_| text.to_string()).map_err(|e| e.to_string())
}

impl LimitArgs {
    /// The limits the flags set, as every front names them (`rsandbox::Limits`: a flag
    /// is `--` and the knob's name). The timeout is apart: the CLI takes fractions and
    /// units (`500ms`), `Limits` whole seconds.
    fn limits(&self) -> rsandbox::Limits {
        rsandbox::Limits {
            timeout: None,
            cpu: self.cpu,
            memory: self.memory.clone(),
            fsize: self.fsize.clone(),
            disk: self.disk.clone(),
            nproc: self.nproc,
            nofile: self.nofile,
            max_output: self.max_output.clone(),
            // The network is the profile's (`--network-allow` sets it for the engine).
            network: None,
        }
    }

    /// The limits: the flags given, else the profile's, else the defaults.
    pub(crate) fn options(&self, profile: &Profile) -> Result<EvalOptions, rsandbox::InputError> {
        let flag = |knob: &str| format!("--{}", knob.replace('_', "-"));
        let mut options = self.limits().apply_named(profile.apply_limits(EvalOptions::default()), flag)?;
        if let Some(text) = &self.timeout {
            // Seconds, or with a unit (500ms, 1.5s, 2m), within the one timeout rule of
            // every front.
            let bad = |what: &str| rsandbox::InputError::BadLimit { what: what.into(), value: text.clone() };
            let secs = text
                .parse::<f64>()
                .or_else(|_| rsandbox::parse_duration(text).map(|d| d.as_secs_f64()))
                .map_err(|_| bad("--timeout (seconds)"))?;
            options.timeout =
                rsandbox::limits::timeout_secs(secs).map_err(|_| bad("--timeout (seconds, above 0, at most 86400)"))?;
        }
        Ok(options)
    }
}

impl EngineArgs {
    /// The profile asked for (`strict` when none).
    pub(crate) fn profile(&self) -> Profile {
        let mut profile = self.profile.clone().unwrap_or_else(Profile::strict);
        if !self.network_allow.is_empty() {
            let network = profile.network.get_or_insert_with(rsandbox::Network::default);
            network
                .allow
                .extend(self.network_allow.iter().filter(|h| !network.allow.contains(h)).cloned().collect::<Vec<_>>());
        }
        profile
    }

    pub(crate) fn config(&self) -> EngineConfig {
        let profile = self.profile();
        let mut preload = self.preload.clone();
        preload.extend(profile.preload.iter().filter(|p| !self.preload.contains(p)).cloned());
        EngineConfig {
            profile,
            preload,
            best_effort: self.best_effort,
            namespaces: !self.no_namespaces,
            audit_log: self.audit_log.clone(),
            run_as: self.uid.map(|uid| rsandbox::identity::RunAs {
                uid,
                gid: self.gid.unwrap_or(uid),
                allow_login_account: self.allow_login_uid,
            }),
            nice: self.nice,
            ..EngineConfig::default()
        }
    }
}

/// As a process killed by SIGPIPE reports itself to a shell (128 + 13).
const EXIT_BROKEN_PIPE: u8 = 141;

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

/// An error message as a CLI user reads it: with the flag that runs without a layer the
/// environment refused. The engine's error (`EngineError::LayerRefused`) says what is kept
/// without it, in the same words wherever it travels (through a front's error string or
/// the daemon's protocol), so the message is where the layer is recognised.
pub fn with_remedy(message: impl std::fmt::Display) -> String {
    let message = message.to_string();
    match rsandbox::RefusedLayer::ALL.into_iter().find(|l| message.contains(l.consequence())) {
        Some(layer) => format!("{message}{}", remedy(layer)),
        None => message,
    }
}

/// How a CLI user runs without a layer the environment refuses (the engine's error says
/// what is kept; the flags are this front's).
fn remedy(layer: rsandbox::RefusedLayer) -> &'static str {
    match layer {
        rsandbox::RefusedLayer::Namespaces | rsandbox::RefusedLayer::PrivateRoot => {
            ": run with --no-namespaces; `rsandbox check --no-namespaces` shows what you get"
        }
        rsandbox::RefusedLayer::Landlock => {
            ": run with --best-effort; `rsandbox check --best-effort` shows what you get"
        }
    }
}

/// The `rsandbox` binary: the servers run in `rsandbox-server` (see [`hand_to_server`]),
/// so this binary links none of their code: 7 725 relocations to apply at each start
/// instead of 16 644, and 4.0 MB of code instead of 9.3. `exec -- /bin/true` took
/// 0.78-0.80 of the time of the one binary with the servers in it (alternating, 400
/// rounds each).
pub fn rsandbox_main() -> ExitCode {
    run(hand_to_server)
}

/// The `rsandbox-server` binary: every command, the servers in this process.
pub fn rsandbox_server_main() -> ExitCode {
    run(run_server)
}

/// Let a server open as many files as its hard limit allows. Each open session holds
/// about nine descriptors in the server (its pipes, channels, pidfd and the meter's
/// `/proc` files), and the soft limit many systems start programs with (1024, kept low
/// for `select`, which this server does not use) ran out near a hundred sessions, where
/// the hard limit (often 524 288) allows thousands. Only the soft limit moves: every
/// sandbox sets its own (`--nofile`, 256 by default). A limit that cannot be raised
/// stays as it is; a sandbox refused for want of descriptors says so (`busy`).
fn raise_open_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        if let Err(e) = setrlimit(Resource::Nofile, Rlimit { current: limit.maximum, maximum: limit.maximum }) {
            eprintln!("rsandbox: could not raise the open-file limit to its hard limit: {e}");
        }
    }
}

/// Parse the command line and run its command; `servers` runs `serve`, `mcp` and the
/// daemon's server.
fn run(servers: fn(Command) -> anyhow::Result<u8>) -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Eval { code, limits, engine, io, json } => {
            evaluate::one(evaluate::Job::code(code), &limits, &engine, &io, json)
        }
        Command::Run { files, args, jobs, shard, limits, engine, io, json } => {
            let batch = jobs.is_some() || shard.is_some() || files.len() > 1 || files.iter().any(|f| f.is_dir());
            if batch {
                evaluate::batch(&files, &args, jobs, shard, &limits, &engine, json)
            } else {
                let job = read_source(&files[0]).map(|code| evaluate::Job { args, ..evaluate::Job::code(code) });
                job.and_then(|job| evaluate::one(job, &limits, &engine, &io, json))
            }
        }
        Command::Exec { limits, engine, json, command } => exec(&command, &limits, &engine, json),
        Command::Lint { file, json } => lint(read_source(&file), json),
        Command::Daemon { stop: true, .. } => daemon::stop_all(),
        command @ (Command::Serve { .. } | Command::Mcp { .. } | Command::Daemon { name: Some(_), .. }) => {
            servers(command)
        }
        Command::Daemon { .. } => {
            Err(anyhow::anyhow!("rsandbox daemon: say --stop (eval and run start the daemon themselves)"))
        }
        Command::Check { json, engine } => check(json, &engine),
        Command::Learn { file, limits, engine } => learn(&file, &limits, &engine),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        // The reader of our output went away (`rsandbox eval … | head`): nothing to say.
        Err(e) if is_broken_pipe(&e) => ExitCode::from(EXIT_BROKEN_PIPE),
        Err(e) => {
            // An error may quote what the sandbox chose (a file name under --output).
            eprintln!("rsandbox: {}", terminal::inert_on_stderr(&with_remedy(format!("{e:#}"))));
            ExitCode::from(error_code(&e).exit_code())
        }
    }
}

/// `serve`, `mcp` and the daemon's server, in this process (`rsandbox-server`).
fn run_server(command: Command) -> anyhow::Result<u8> {
    raise_open_file_limit();
    match command {
        Command::Serve { stdio: _, http, token_file, caps, prefork, node, engine } => match node.apply() {
            Ok(()) => serve(&engine, prefork, http, token_file, &caps),
            Err(code) => Ok(code),
        },
        Command::Mcp {
            http,
            token_file,
            max_sessions,
            max_sessions_per_connection,
            idle_timeout,
            max_memory,
            header_timeout,
            shutdown_grace,
            prefork,
            node,
            engine,
        } => match node.apply() {
            Ok(()) => {
                let config = McpArgs {
                    max_sessions,
                    max_sessions_per_connection,
                    idle_timeout,
                    max_memory,
                    header_timeout,
                    shutdown_grace,
                };
                mcp(&engine, prefork, http, token_file, &config)
            }
            Err(code) => Ok(code),
        },
        Command::Daemon { name: Some(name), engine, .. } => daemon::serve(&name, engine.config()),
        _ => unreachable!("run_server is given the servers' commands only"),
    }
}

/// `serve`, `mcp` and the daemon's server, in the `rsandbox` binary: `rsandbox-server`
/// runs the same command line in this process's place (the same pid, descriptors,
/// environment and signals: an R package or a supervisor holding this process holds the
/// server), so that this binary links none of the servers' code.
fn hand_to_server(_: Command) -> anyhow::Result<u8> {
    use std::os::unix::process::CommandExt;
    let server = server_binary().map_err(anyhow::Error::msg)?;
    let error = std::process::Command::new(&server).args(std::env::args_os().skip(1)).exec();
    Err(anyhow::anyhow!("could not start {}: {error}", server.display()))
}

/// The server binary: `$RSANDBOX_SERVER`, else `rsandbox-server` beside this executable
/// (as the zygote is found).
pub(crate) fn server_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("RSANDBOX_SERVER").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let server = exe.with_file_name("rsandbox-server");
    if server.is_file() {
        Ok(server)
    } else {
        Err(format!(
            "{} not found: `serve`, `mcp` and the daemon run in rsandbox-server, installed beside rsandbox \
             (cargo build builds both); or set RSANDBOX_SERVER",
            server.display()
        ))
    }
}

/// The error code of a failed command, whose exit status it decides: the engine's
/// error's, bad input for input the CLI refused itself, else an engine error.
fn error_code(e: &anyhow::Error) -> ErrorCode {
    if let Some(engine) = e.downcast_ref::<EngineError>() {
        return ErrorCode::of(engine);
    }
    if let Some(service) = e.downcast_ref::<fronts::core::ServiceError>() {
        return service.code;
    }
    if e.downcast_ref::<rsandbox::InputError>().is_some() {
        return ErrorCode::BadInput;
    }
    ErrorCode::EngineError
}

/// `rsandbox learn`: the profile on stdout when the code ran to the end (exit 0, or 1
/// when it made forbidden calls no profile grants); the notes on stderr either way
/// (exit 1 and nothing on stdout when it could not run to the end).
fn learn(file: &PathBuf, limits: &LimitArgs, engine: &EngineArgs) -> anyhow::Result<u8> {
    let code = read_source(file)?;
    let config = engine.config();
    let options = limits.options(&config.profile)?;
    let learned = rsandbox::learn::learn(&config, &code, &options)?;
    for note in &learned.notes {
        eprintln!("rsandbox learn: {}", terminal::inert_on_stderr(note));
    }
    // Code that ran to the end only because learning refused its forbidden calls still
    // gets its profile (naming those calls), with exit 1.
    if !learned.succeeded && learned.last.outcome != rsandbox::Outcome::Ok {
        return Ok(1);
    }
    // What is printed must load: checked here, not by the next reader.
    learned.profile()?;
    out_no_newline!("{}", learned.to_toml());
    Ok(if learned.succeeded { 0 } else { 1 })
}

pub(crate) fn read_source(file: &PathBuf) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    if file.as_os_str() == "-" {
        std::io::stdin().read_to_end(&mut bytes).context("failed to read standard input")?;
    } else {
        bytes = std::fs::read(file)
            .map_err(|e| rsandbox::InputError::File { path: file.display().to_string(), reason: e.to_string() })?;
    }
    String::from_utf8(bytes).map_err(|_| rsandbox::InputError::NotUtf8.into())
}

pub(crate) fn print_like_rscript(result: &EvalResult, options: &EvalOptions) -> anyhow::Result<()> {
    // Everything below but our own last line is the sandbox's text.
    let tty = terminal::Terminals::detect();
    let shown = |text: &str| terminal::inert(text, tty.stderr).into_owned();
    let mut out = std::io::stdout().lock();
    out.write_all(terminal::inert(&result.stdout, tty.stdout).as_bytes())?;
    out.flush()?;
    let mut err = std::io::stderr().lock();
    err.write_all(shown(&result.stderr).as_bytes())?;
    for m in &result.messages {
        err.write_all(shown(m).as_bytes())?;
    }
    for w in &result.warnings {
        match &w.call {
            Some(call) => writeln!(err, "Warning message:\nIn {} : {}", shown(call), shown(&w.message))?,
            None => writeln!(err, "Warning message:\n{}", shown(&w.message))?,
        }
    }
    if let Some(e) = &result.error {
        match &e.call {
            Some(call) => writeln!(err, "Error in {} : {}", shown(call), shown(&e.message))?,
            None => writeln!(err, "Error: {}", shown(&e.message))?,
        }
    }
    // A crash's detail is the error printed above.
    let why = match result.outcome {
        Outcome::Crashed => None,
        _ => fronts::core::outcome::stopped(result, options.timeout, options.max_output),
    };
    if let Some(why) = why {
        writeln!(err, "rsandbox: {}: {why}", result.outcome.name())?;
    }
    if let Some(note) = fronts::core::outcome::network_note(result) {
        writeln!(err, "rsandbox: {note}")?;
    }
    Ok(())
}

fn exec(command: &[String], limits: &LimitArgs, engine: &EngineArgs, json: bool) -> anyhow::Result<u8> {
    let options = limits.options(&engine.profile())?;
    let (program, args) = command.split_first().context("no program given")?;
    let report = rsandbox::exec::exec(program, args, &options, &engine.config())?;
    if json {
        eprintln!("{}", serde_json::to_string(&report)?);
    } else if report.outcome != Outcome::Ok && report.outcome != Outcome::Error {
        eprintln!("rsandbox: {}: {}", report.outcome.name(), report.description);
    }
    Ok(match (report.outcome, report.exit.code) {
        (Outcome::Ok | Outcome::Error, Some(code)) => code as u8,
        (outcome, _) => outcome.exit_code() as u8,
    })
}

fn lint(code: anyhow::Result<String>, json: bool) -> anyhow::Result<u8> {
    let findings = fronts::lint::lint(&code?);
    if json {
        out!("{}", serde_json::to_string(&findings)?);
    } else {
        for f in &findings {
            let concern = serde_json::to_value(f.concern)?;
            out!("{}:{}: {} ({})", f.line, f.column, f.call, concern.as_str().unwrap_or_default());
        }
    }
    Ok(0)
}

/// `rsandbox mcp`'s server options.
struct McpArgs {
    max_sessions: usize,
    max_sessions_per_connection: usize,
    idle_timeout: f64,
    max_memory: String,
    header_timeout: u64,
    shutdown_grace: u64,
}

fn mcp(
    engine: &EngineArgs,
    prefork: Option<usize>,
    http: Option<std::net::SocketAddr>,
    token_file: Option<PathBuf>,
    args: &McpArgs,
) -> anyhow::Result<u8> {
    let idle_timeout = args.idle_timeout;
    if !(idle_timeout.is_finite() && idle_timeout > 0.0) {
        eprintln!("rsandbox: --idle-timeout must be a positive number of seconds, got {idle_timeout}");
        return Ok(EXIT_BAD_INPUT);
    }
    if args.max_sessions == 0 || args.max_sessions_per_connection == 0 {
        eprintln!("rsandbox: --max-sessions and --max-sessions-per-connection must be at least 1");
        return Ok(EXIT_BAD_INPUT);
    }
    let defaults = fronts::core::Caps::mcp();
    let config = fronts::core::Caps {
        max_memory: parse_size(&args.max_memory)?,
        sessions: fronts::core::SessionCaps {
            max_sessions: Some(args.max_sessions),
            max_sessions_per_connection: Some(args.max_sessions_per_connection),
            idle_timeout: Some(Duration::from_secs_f64(idle_timeout)),
            ..defaults.sessions
        },
        ..defaults
    };
    let connections = fronts::listen::ConnectionLimits {
        header_timeout: Duration::from_secs(args.header_timeout.max(1)),
        shutdown_grace: Duration::from_secs(args.shutdown_grace),
    };
    let engine_config = engine.config();
    let tokens = match network_access(http, token_file.as_deref(), engine_config.profile.network.as_ref()) {
        Ok(tokens) => tokens,
        Err(code) => return Ok(code),
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let engine = rsandbox::Engine::start(EngineConfig { prefork: prefork.unwrap_or(cores), ..engine_config })?;
    match http {
        None => fronts::mcp::serve_stdio(engine, config).map_err(anyhow::Error::msg)?,
        Some(addr) => fronts::mcp::serve_http(engine, addr, tokens, config, connections, |bound| {
            eprintln!("rsandbox mcp: listening on http://{bound}/mcp");
        })
        .map_err(anyhow::Error::msg)?,
    }
    Ok(0)
}

fn serve(
    engine: &EngineArgs,
    prefork: Option<usize>,
    http: Option<std::net::SocketAddr>,
    token_file: Option<PathBuf>,
    cap_args: &HttpCapArgs,
) -> anyhow::Result<u8> {
    let caps = cap_args.caps()?;
    let engine_config = engine.config();
    let tokens = match network_access(http, token_file.as_deref(), engine_config.profile.network.as_ref()) {
        Ok(tokens) => tokens,
        Err(code) => return Ok(code),
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let engine = rsandbox::Engine::start(EngineConfig { prefork: prefork.unwrap_or(cores), ..engine_config })?;
    match http {
        None => {
            // `stdio::serve` serves one client (the daemon runs it per connection, on a
            // shared engine): the engine's shutdown is the server's, here, once its
            // client is gone; its last handle then drops in this thread, directories and all.
            let last = engine.clone();
            let input = std::io::stdin().as_fd().try_clone_to_owned().context("cannot read the standard input")?;
            fronts::stdio::serve(engine, input, std::io::stdout()).context("cannot serve the standard input")?;
            last.shutdown();
        }
        Some(addr) => {
            cap_args.start_logging();
            fronts::http::serve(
                engine,
                addr,
                tokens,
                caps,
                cap_args.connections(),
                cap_args.snapshot_dir.clone(),
                |bound| {
                    // The first line, plain, for scripts waiting for the address.
                    eprintln!("rsandbox serve: listening on http://{bound}");
                },
            )
            .map_err(anyhow::Error::msg)?
        }
    }
    Ok(0)
}

/// The tokens for a network front, checked with the loopback rule and against the
/// profile's network allowlist (`network`) before R starts: a bad token file, a token's
/// `network=` outside the profile's or an open bind is bad input (exit 2), said on
/// stderr. (The fronts check the allowlists again when they start.)
fn network_access(
    http: Option<std::net::SocketAddr>,
    token_file: Option<&std::path::Path>,
    network: Option<&rsandbox::Network>,
) -> Result<Option<fronts::auth::Tokens>, u8> {
    let tokens = token_file.map(fronts::auth::Tokens::load).transpose().map_err(|e| {
        eprintln!("rsandbox: {e}");
        EXIT_BAD_INPUT
    })?;
    if let Err(e) = fronts::core::TokenNetworks::new(tokens.as_ref(), network) {
        eprintln!("rsandbox: {}: {e}", token_file.map(|p| p.display().to_string()).unwrap_or_default());
        return Err(EXIT_BAD_INPUT);
    }
    if let Some(Err(e)) = http.map(|addr| fronts::auth::check_bind(addr, tokens.as_ref())) {
        eprintln!("rsandbox: {e}");
        return Err(EXIT_BAD_INPUT);
    }
    Ok(tokens)
}

/// What this machine offers, and what an evaluation with these options gets: a real
/// sandbox is started and locked down, and its `layers` reported (a probe of the pieces
/// alone said "possible" where every evaluation then failed).
fn check(json: bool, engine: &EngineArgs) -> anyhow::Result<u8> {
    let probe = lockdown::probe();
    let started = rsandbox::Engine::start(EngineConfig { warm: false, ..engine.config() });
    let programs = started.as_ref().map(|e| e.programs()).unwrap_or_default();
    let evaluation = started.and_then(|e| e.eval("invisible(NULL)", &EvalOptions::default()));
    let (layers, accounting, failure) = match evaluation {
        Ok(r) if r.outcome == Outcome::Ok => (r.layers, r.usage.memory_accounting, None),
        Ok(r) => (r.layers, None, Some(format!("a test evaluation ended {}: {:?}", r.outcome.name(), r.error))),
        Err(e) => (None, None, Some(with_remedy(e))),
    };
    // How limits are counted: per process by rlimits, and per sandbox by the meter.
    let accounting_json = accounting.map(|memory| {
        serde_json::json!({"scope": "sandbox", "by": "meter", "interval_ms": rsandbox::meter::INTERVAL.as_millis() as u64,
            "cpu": "process group", "memory": memory, "cgroup": false})
    });
    // Strict: every layer, as the default policy asks for it.
    let strict = layers.as_ref().is_some_and(|l| {
        l.landlock == lockdown::LandlockEnforcement::Full
            && l.seccomp
            && l.private_root
            && l.workspace_quota.is_some()
            && ["net", "ipc", "uts"].iter().all(|n| l.namespaces.iter().any(|m| m == n))
    });
    let profile = engine.profile();
    let profile_json = serde_json::json!({
        "name": profile.name,
        "read": profile.read,
        "write": profile.write,
        "exec": programs,
        "packages": profile.packages,
        "preload": profile.preload,
        "limits": {"timeout": profile.limits.timeout, "memory": profile.limits.memory, "cpu": profile.limits.cpu,
                   "nproc": profile.limits.nproc, "disk": profile.limits.disk, "fsize": profile.limits.fsize, "nofile": profile.limits.nofile},
        "network": profile.network,
    });
    if json {
        let mut value = serde_json::to_value(&probe)?;
        value["profile"] = profile_json;
        value["strict_policy_possible"] = serde_json::Value::Bool(strict);
        value["evaluation"] = match (&layers, &failure) {
            (Some(l), None) => serde_json::json!({"runs": true, "layers": l, "accounting": accounting_json}),
            (_, why) => serde_json::json!({"runs": false, "error": why}),
        };
        out!("{value}");
        return Ok(if failure.is_none() { 0 } else { 1 });
    }
    let yes = |b: bool| if b { "yes" } else { "no" };
    out!("kernel offers");
    out!("  landlock         ABI {} (rsandbox needs {})", probe.landlock_abi, probe.landlock_required_abi);
    out!("  seccomp          {}", yes(probe.seccomp));
    out!("  namespaces       {}", if probe.namespaces { "yes" } else { "refused here" });
    out!(
        "  running as root  {} {}",
        yes(probe.root),
        if probe.root { "(each sandbox drops to its own uid)" } else { "(sandboxes keep your uid)" }
    );
    out!(
        "  cgroup v2        {}",
        if probe.cgroup_v2_writable {
            "writable (not used: the meter counts instead)"
        } else {
            "not writable (not used)"
        }
    );
    match (&layers, &failure) {
        (Some(l), None) => {
            out!("an evaluation gets (a real sandbox was started and locked down)");
            let namespaces = if l.namespaces.is_empty() {
                "none (no separate network stack; no socket can be created anyway)".to_string()
            } else {
                l.namespaces.join(", ")
            };
            out!("  namespaces       {namespaces}");
            out!(
                "  private root     {}",
                if l.private_root {
                    "yes: host paths do not exist inside"
                } else {
                    "no: host paths are visible to stat, Landlock keeps them unreadable"
                }
            );
            out!(
                "  disk quota       {}",
                l.workspace_quota.map_or(
                    "NOT enforced (no tmpfs without a mount namespace; --fsize still caps each file)".to_string(),
                    |b| format!("{} MiB tmpfs", b >> 20)
                )
            );
            let shared =
                if engine.uid.is_some() { " for every sandbox (--uid: process limits are shared)" } else { "" };
            out!(
                "  identity         {}{shared}",
                l.identity.map_or("the caller's".to_string(), |i| format!("uid {} gid {}", i.uid, i.gid))
            );
            out!("  priority         {}", l.nice.map_or("inherited".to_string(), |n| format!("nice {n}")));
            out!("  landlock         {:?}", l.landlock);
            out!("  seccomp          {}", yes(l.seccomp));
            out!("  no_new_privs, rlimits, clean environment: yes");
            match (&profile.network, l.proxy_port) {
                (Some(network), Some(port)) => out!(
                    "  network          allowlist on: {} (through the supervisor's proxy, 127.0.0.1:{port} in the sandbox's own \
                     network namespace; TCP client sockets to that port only; no DNS, UDP, raw or server sockets)",
                    network.allow.join(", ")
                ),
                (Some(_), None) => out!("  network          allowlist asked for, but the sandbox got no proxy"),
                (None, _) => out!("  network          none (allowlist off: no socket can be created)"),
            }
            let memory = match accounting {
                Some(rsandbox::meter::MemoryAccounting::Pss) => "proportional (PSS: pages shared after fork count once)",
                _ => "resident (RSS: pages a forked child shares count again; /proc/PID/smaps_rollup is not readable here)",
            };
            out!("  accounting       per sandbox: CPU and memory of all its processes together, metered every {} ms; memory {memory}", rsandbox::meter::INTERVAL.as_millis());
            let packages = match &profile.packages {
                None => "every installed package".to_string(),
                Some(p) => {
                    format!("only {} and their dependencies (the others do not exist in the sandbox)", p.join(", "))
                }
            };
            out!(
                "  profile          {}: {packages}{}",
                profile.name,
                if profile.read.is_empty() { String::new() } else { format!("; also reads {:?}", profile.read) }
            );
            if !profile.write.is_empty() {
                let dirs: Vec<String> = profile.write.iter().map(|p| p.display().to_string()).collect();
                out!("  also writable    {} (host directories: no disk quota covers them; later sandboxes and the host read what is written there)", dirs.join(", "));
            }
            if programs.is_empty() {
                out!("  programs         none (execve is a violation that ends the sandbox)");
            } else {
                let names: Vec<String> = programs.iter().map(|p| p.display().to_string()).collect();
                out!(
                    "  programs         only these may be executed ({}), everything else fails; whatever runs stays inside every \
                     layer above, and the ELF loader among them can run any readable program, as native code in R could: {}",
                    names.len(),
                    names.join(" ")
                );
            }
            if !profile.libraries.is_empty() {
                let libraries: Vec<String> = profile.libraries.iter().map(|p| p.display().to_string()).collect();
                out!("  libraries        also {} (searched first, readable)", libraries.join(", "));
            }
            if let Some(functions) = &profile.functions {
                out!(
                    "  functions        only these {} (code calling anything else is refused before it runs; a convenience \
                     over the kernel's walls, not one of them): {}",
                    functions.len(),
                    functions.join(" ")
                );
            }
            out!("strict policy    {}", if strict { "yes" } else { "no (see above)" });
            Ok(0)
        }
        (_, why) => {
            out!("an evaluation FAILS here: {}", why.as_deref().unwrap_or("unknown"));
            Ok(1)
        }
    }
}
