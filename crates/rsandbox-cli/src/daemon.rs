//! The user-level daemon that makes the one-shot `rsandbox eval`/`run` cheap.
//!
//! An `eval` on its own pays for a whole R start-up (~150 ms). Instead the CLI asks a
//! daemon of the same user, which keeps an engine with pre-forked children, over the
//! stdio protocol on a unix socket; the first call starts that daemon in the background
//! (and evaluates on its own, as before), later calls cost a socket round trip.
//!
//! Who may talk to it: the socket lives in a directory only this user can enter
//! (`$XDG_RUNTIME_DIR/rsandbox`, or `/tmp/rsandbox-<uid>`, created 0700 and refused if
//! it is a symlink, someone else's, or open to others), and each end checks the other
//! (`SO_PEERCRED`): the same uid, and a process of its own pid namespace. One daemon per
//! engine configuration and pid namespace: the key hashes the binaries (path and mtime),
//! the engine flags, the environment the engine reads (`TZ`, `R_HOME`, `TMPDIR`,
//! `RSANDBOX_ZYGOTE`) and the pid namespace (a container that shares the directory with
//! the host or another container gets a daemon of its own). A daemon exits after an idle period
//! (`RSANDBOX_DAEMON_IDLE` seconds, default 600) and removes its socket.
//! `RSANDBOX_NO_DAEMON=1` or `--no-daemon` turns all of this off.

use base64::Engine as _;
use fronts::core::error::ErrorDetail;
use fronts::core::ErrorCode;
use rsandbox::{Engine, EngineConfig, EvalOptions, EvalRequest, EvalResult};
use serde_json::{json, Value};
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Set by SIGTERM (`rsandbox daemon --stop`): the daemon shuts down cleanly.
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_sigterm(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Default idle period before a daemon exits.
const DEFAULT_IDLE: Duration = Duration::from_secs(600);
/// Largest response line accepted from the daemon (results are capped by the output
/// limit; plots come base64).
const MAX_RESPONSE: u64 = 256 << 20;

/// What selects a daemon: everything that changes what an evaluation gets.
pub struct DaemonKey {
    preload: Vec<String>,
    best_effort: bool,
    namespaces: bool,
}

impl DaemonKey {
    /// The key for an engine configuration; `None` when the daemon cannot serve it
    /// (an audit log belongs to the invocation that names it).
    pub fn for_config(config: &EngineConfig) -> Option<DaemonKey> {
        // A profile other than the default, a fixed identity or a priority are the
        // invocation's own too (the daemon is started by name with the engine flags only).
        if config.audit_log.is_some()
            || config.zygote_path.is_some()
            || config.workspace_root.is_some()
            || config.profile.name != "strict"
            || config.profile.network.is_some()
            || config.run_as.is_some()
            || config.nice.is_some()
        {
            return None;
        }
        Some(DaemonKey {
            preload: config.preload.clone(),
            best_effort: config.best_effort,
            namespaces: config.namespaces,
        })
    }

    /// The socket's file name: a hash of the key, the binaries and the environment.
    fn name(&self) -> String {
        let mut h = std::hash::DefaultHasher::new();
        (&self.preload, self.best_effort, self.namespaces).hash(&mut h);
        let exe = std::env::current_exe().ok();
        let server = crate::server_binary().ok();
        let zygote = rsandbox::zygote::locate_zygote(None).ok();
        for binary in [exe, server, zygote].into_iter().flatten() {
            binary.hash(&mut h);
            std::fs::metadata(&binary).and_then(|m| m.modified()).ok().hash(&mut h);
        }
        for var in ["TZ", "R_HOME", "TMPDIR", "RSANDBOX_ZYGOTE", "RSANDBOX_SERVER"] {
            std::env::var_os(var).hash(&mut h);
        }
        // A daemon evaluates in its own world (its R, its files): one of another pid
        // namespace sharing this directory is not this caller's.
        std::fs::read_link("/proc/self/ns/pid").ok().hash(&mut h);
        format!("daemon-{:016x}", h.finish())
    }
}

/// The directory for this user's daemon sockets, created if missing. An error when it
/// exists but is not safe: a symlink, someone else's, or open to others.
pub fn runtime_dir() -> Result<PathBuf, String> {
    let uid = rustix::process::geteuid().as_raw();
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(base) if base.is_absolute() && std::fs::metadata(&base).is_ok_and(|m| m.uid() == uid) => {
            base.join("rsandbox")
        }
        _ => std::env::temp_dir().join(format!("rsandbox-{uid}")),
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(&dir).map_err(|e| format!("cannot inspect {}: {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    if meta.uid() != uid {
        return Err(format!("{} belongs to uid {}, not to uid {uid}", dir.display(), meta.uid()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!("{} is open to other users (mode {:o})", dir.display(), meta.permissions().mode() & 0o777));
    }
    Ok(dir)
}

/// How a request through the daemon went.
pub enum Answer {
    /// The evaluation's result.
    Result(Box<EvalResult>),
    /// The daemon refused the request (`bad_input`, `sandbox_setup_failed`, ...).
    Refused(ErrorDetail),
}

/// Evaluate through this user's daemon. `Ok(None)`: no daemon answers (one is started
/// in the background for the next call); the caller evaluates on its own.
pub fn eval(key: &DaemonKey, request: &EvalRequest<'_>) -> Result<Option<Answer>, String> {
    let dir = runtime_dir()?;
    let socket = dir.join(format!("{}.sock", key.name()));
    let Ok(mut stream) = UnixStream::connect(&socket) else {
        start(key, &dir)?;
        return Ok(None);
    };
    // The directory is ours and 0700, so only we (or root) could have made this
    // socket; the daemon must also run as us, where we can see it.
    let peer = peer_credentials(&stream)
        .map_err(|e| format!("cannot tell who runs the daemon at {} (SO_PEERCRED: {e})", socket.display()))?;
    let me = rustix::process::geteuid().as_raw();
    if peer.uid != me {
        return Err(format!("the daemon at {} runs as uid {}, not {me}", socket.display(), peer.uid));
    }
    if peer.pid == 0 {
        return Err(format!(
            "the daemon at {} runs outside this pid namespace (the host or another container shares the directory)",
            socket.display()
        ));
    }
    let files: Vec<Value> = request
        .files
        .iter()
        .map(
            |(path, data)| json!({"path": path, "data_base64": base64::engine::general_purpose::STANDARD.encode(data)}),
        )
        .collect();
    let request = json!({
        "op": "eval", "id": 1, "code": request.code, "timeout": request.options.timeout.as_secs_f64(),
        "limits": limits_json(&request.options), "files": files, "collect": request.collect, "args": request.args,
    });
    let mut line = request.to_string();
    line.push('\n');
    stream.write_all(line.as_bytes()).map_err(|e| format!("failed to send to the daemon: {e}"))?;
    stream.shutdown(std::net::Shutdown::Write).map_err(|e| format!("failed to send to the daemon: {e}"))?;
    let mut response = String::new();
    BufReader::new(stream.take(MAX_RESPONSE))
        .read_line(&mut response)
        .map_err(|e| format!("failed to read the daemon's answer: {e}"))?;
    if response.is_empty() {
        return Err("the daemon ended without answering".into());
    }
    let response: Value =
        serde_json::from_str(&response).map_err(|e| format!("the daemon's answer is not JSON: {e}"))?;
    if let Some(result) = response.get("result") {
        let result =
            serde_json::from_value(result.clone()).map_err(|e| format!("the daemon's result is malformed: {e}"))?;
        return Ok(Some(Answer::Result(Box::new(result))));
    }
    // An answer that is neither a result nor an error the protocol names is the
    // daemon failing, never a reason to take the request as bad.
    let error = serde_json::from_value(response["error"].clone()).unwrap_or_else(|_| ErrorDetail {
        code: ErrorCode::EngineError,
        message: "the daemon refused the request without a known error code".into(),
    });
    Ok(Some(Answer::Refused(error)))
}

/// The protocol's limits object for these options (sizes in bytes).
fn limits_json(o: &EvalOptions) -> Value {
    let bytes = |v: Option<u64>| v.map(|b| b.to_string());
    json!({
        "cpu": o.cpu_seconds, "memory": bytes(o.memory), "fsize": bytes(o.file_size), "disk": bytes(o.disk),
        "nproc": o.processes, "nofile": o.open_files, "max_output": o.max_output.to_string(),
    })
}

/// Start a daemon for `key` in the background (detached, in its own session).
fn start(key: &DaemonKey, dir: &Path) -> Result<(), String> {
    // The daemon is a server: `rsandbox-server` runs it (started directly, not through
    // `rsandbox daemon`, which would hand it over with one more exec).
    let exe = crate::server_binary()?;
    let name = key.name();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(dir.join(format!("{name}.log")))
        .map_err(|e| format!("cannot open the daemon log: {e}"))?;
    let mut command = Command::new(exe);
    command.arg("daemon").arg("--name").arg(&name);
    if !key.preload.is_empty() {
        command.arg("--preload").arg(key.preload.join(","));
    }
    if key.best_effort {
        command.arg("--best-effort");
    }
    if !key.namespaces {
        command.arg("--no-namespaces");
    }
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log).current_dir("/");
    // SAFETY: the closure makes one raw system call (rustix's setsid allocates nothing
    // and is async-signal-safe); it detaches the daemon from our terminal and process
    // group, so a Ctrl-C meant for this command does not reach it.
    unsafe {
        command.pre_exec(|| rustix::process::setsid().map(drop).map_err(std::io::Error::from));
    }
    // Not waited for: it outlives us and is reparented.
    command.spawn().map(drop).map_err(|e| format!("failed to start the daemon: {e}"))
}

/// `rsandbox daemon --name NAME`: serve until idle. Exits quietly if another daemon of
/// the same name holds the lock.
pub fn serve(name: &str, config: EngineConfig) -> anyhow::Result<u8> {
    anyhow::ensure!(
        name.starts_with("daemon-") && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'),
        "invalid daemon name {name:?}"
    );
    let dir = runtime_dir().map_err(anyhow::Error::msg)?;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .mode(0o600)
        .open(dir.join(format!("{name}.lock")))?;
    if rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        return Ok(0); // another daemon of this name is up or starting
    }
    let socket = dir.join(format!("{name}.sock"));
    // Ours (we hold the lock): a socket left by a daemon that was killed.
    match std::fs::remove_file(&socket) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => anyhow::bail!("cannot remove the stale socket {}: {e}", socket.display()),
    }
    // libc, not rustix: rustix installs signal handlers only in its `runtime` feature,
    // which is for programs that replace libc.
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    if unsafe { libc::signal(libc::SIGTERM, on_sigterm as *const () as libc::sighandler_t) } == libc::SIG_ERR {
        anyhow::bail!("failed to install the SIGTERM handler: {}", std::io::Error::last_os_error());
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let engine = Engine::start(EngineConfig { prefork: cores, ..config })?;
    let listener = UnixListener::bind(&socket)?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
    // Written aside and renamed into place: a reader never sees the file empty or half written.
    let pid_file = dir.join(format!("{name}.pid"));
    let pid_draft = dir.join(format!("{name}.pid.draft"));
    std::fs::write(&pid_draft, std::process::id().to_string())?;
    std::fs::rename(&pid_draft, &pid_file)?;
    let idle = std::env::var("RSANDBOX_DAEMON_IDLE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(DEFAULT_IDLE, Duration::from_secs_f64);
    let served = accept_until_idle(&listener, &engine, idle);
    // Remove the socket first, so no client connects to a daemon on its way out.
    std::fs::remove_file(&socket).ok();
    std::fs::remove_file(&pid_file).ok();
    // Dropped here, after the forks under way: its directories go with it.
    engine.shutdown();
    drop(engine);
    served?;
    Ok(0)
}

/// Serves connections until the daemon is idle for `idle` or told to stop; returns once
/// every connection's thread has ended, so that the caller's engine is the last clone
/// and its directories go when it is dropped (a thread still serving held a clone, and
/// the daemon exited with its directories left behind: seen in CI, where the
/// connection of `daemon --stop` itself was still being served).
fn accept_until_idle(listener: &UnixListener, engine: &Engine, idle: Duration) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    // Each connection's thread, and a clone of its socket to end its reading with.
    let mut connections: Vec<(UnixStream, std::thread::JoinHandle<()>)> = Vec::new();
    let last_seen = Arc::new(Mutex::new(Instant::now()));
    let me = rustix::process::geteuid().as_raw();
    let result = loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                if !peer_is(&stream, me) {
                    continue; // dropped unanswered: not this user's
                }
                *last_seen.lock().expect("clock") = Instant::now();
                let (Ok(reader), Ok(closer)) = (stream.try_clone(), stream.try_clone()) else {
                    continue; // out of descriptors: this client sees its connection close
                };
                let (engine, last_seen) = (engine.clone(), last_seen.clone());
                let thread = std::thread::spawn(move || {
                    // Out of descriptors: this client sees its connection close.
                    let _ = fronts::stdio::serve(engine, OwnedFd::from(reader), stream);
                    *last_seen.lock().expect("clock") = Instant::now();
                });
                connections.retain(|(_, thread)| !thread.is_finished());
                connections.push((closer, thread));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let quiet = last_seen.lock().expect("clock").elapsed();
                let serving = connections.iter().any(|(_, thread)| !thread.is_finished());
                if STOP.load(Ordering::SeqCst) || (!serving && quiet >= idle) {
                    break Ok(());
                }
                // Waking every 200 ms to look at the idle clock; an interrupted or failed
                // wait only means the loop looks again sooner.
                let mut fds = [rustix::event::PollFd::new(listener, rustix::event::PollFlags::IN)];
                let tick = rustix::event::Timespec { tv_sec: 0, tv_nsec: 200_000_000 };
                rustix::event::poll(&mut fds, Some(&tick)).ok();
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // A client that left before it was taken costs nothing.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => {}
            // Out of descriptors (ours or the system's) or of kernel memory: the server's
            // capacity, as the HTTP front's accept loop treats it. The connections open
            // are served on, and a waiting client is taken once one ends; a stop still
            // stops. Ending the daemon here ended every client's sessions.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)) => {
                if STOP.load(Ordering::SeqCst) {
                    break Ok(());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => break Err(e.into()),
        }
    };
    // Reading ends on every connection: each finishes the requests it has read (their
    // answers still go out), sees its input end, and its thread drops its engine clone.
    for (closer, _) in &connections {
        // A connection its client already closed cannot be shut down: it ends anyway.
        closer.shutdown(std::net::Shutdown::Read).ok();
    }
    for (_, thread) in connections {
        // A thread that panicked has ended too, its clone dropped in the unwind.
        thread.join().ok();
    }
    result
}

/// Whether the peer of `stream` runs as `uid`, in our pid namespace.
fn peer_is(stream: &UnixStream, uid: u32) -> bool {
    peer_credentials(stream).is_ok_and(|cred| cred.uid == uid && cred.pid != 0)
}

/// The peer's credentials (`SO_PEERCRED`), as the kernel gives them: a pid of 0 means a
/// process outside our pid namespace. Read into libc's `ucred`, not rustix's `UCred`:
/// rustix holds the pid as a non-zero `Pid`, so that answer is undefined behaviour there
/// (in a container sharing the host's daemon directory it came out as the error
/// "Success (os error 0)").
fn peer_credentials(stream: &UnixStream) -> std::io::Result<libc::ucred> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are live locals, writable, and `len` is `cred`'s size; the
    // fd belongs to `stream`, which outlives the call.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if len as usize != std::mem::size_of::<libc::ucred>() {
        return Err(std::io::Error::other(format!("a short answer ({len} bytes)")));
    }
    Ok(cred)
}

/// `rsandbox daemon --stop`: end every daemon of this user (they finish what they run).
/// A daemon is found by its socket, and the process signalled is the one the kernel
/// names as the socket's listener (`SO_PEERCRED`, checked to be this user's), never a pid
/// read from a file: a stale pid file may name a process that reused the pid. A daemon
/// still starting (it holds its lock but listens on no socket yet: the first `eval`
/// answers by itself and starts one for the calls after it) is waited for, up to
/// [`START_WAIT`], and stopped once it listens; before, `eval` then `daemon --stop` at
/// once stopped nothing and left the daemon running until it was idle.
pub fn stop_all() -> anyhow::Result<u8> {
    let dir = runtime_dir().map_err(anyhow::Error::msg)?;
    let me = rustix::process::geteuid().as_raw();
    let mut stopped = 0;
    let paths: Vec<PathBuf> = std::fs::read_dir(&dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    let with = |extension: &'static str| paths.iter().filter(move |p| p.extension().is_some_and(|e| e == extension));
    for socket in with("sock") {
        match signal_listener(socket, me) {
            Listener::Stopped => stopped += 1,
            Listener::NotOurs => {}
            Listener::None => {
                // Nobody listens: what is left of a daemon that died. Nothing to signal.
                std::fs::remove_file(socket).ok();
                std::fs::remove_file(socket.with_extension("pid")).ok();
            }
        }
    }
    let starting: Vec<&PathBuf> =
        with("lock").filter(|lock| !lock.with_extension("sock").exists() && is_held(lock)).collect();
    let deadline = Instant::now() + START_WAIT;
    for lock in starting {
        let socket = lock.with_extension("sock");
        loop {
            if socket.exists() {
                if signal_listener(&socket, me) == Listener::Stopped {
                    stopped += 1;
                    break;
                }
            } else if !is_held(lock) {
                break; // it gave up starting (or another stop ended it)
            }
            if Instant::now() >= deadline {
                eprintln!(
                    "rsandbox: a daemon still starting after {START_WAIT:?} ({}) was not stopped",
                    lock.display()
                );
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    eprintln!("rsandbox: stopped {stopped} daemon(s)");
    Ok(0)
}

/// The longest `daemon --stop` waits for a daemon that is starting (its engine's start:
/// R, and the packages it preloads).
const START_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, PartialEq, Eq)]
enum Listener {
    /// The listener, this user's process in our pid namespace, was sent SIGTERM.
    Stopped,
    /// A listener of another uid, or outside our pid namespace (pid 0): not ours to
    /// stop, and its socket is left alone.
    NotOurs,
    /// Nobody listens.
    None,
}

/// Send SIGTERM to the process listening on `socket`, if it is `uid`'s.
fn signal_listener(socket: &Path, uid: u32) -> Listener {
    let Ok(stream) = UnixStream::connect(socket) else { return Listener::None };
    let listener = peer_credentials(&stream)
        .ok()
        .filter(|cred| cred.uid == uid)
        .and_then(|cred| rustix::process::Pid::from_raw(cred.pid));
    let ended = listener.map(|pid| {
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
            .and_then(|pidfd| rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::TERM))
    });
    match ended {
        Some(Ok(())) => Listener::Stopped,
        _ => Listener::NotOurs,
    }
}

/// Whether a daemon holds the lock at `path` (it is up or starting). Tested by taking
/// it for a moment: a daemon starting in that moment finds it taken and leaves, as it
/// would beside another daemon of its name.
fn is_held(path: &Path) -> bool {
    std::fs::File::open(path).is_ok_and(|file| {
        rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
            .is_err_and(|e| e == rustix::io::Errno::WOULDBLOCK)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_uid_is_served() {
        let (a, _b) = UnixStream::pair().unwrap();
        let me = rustix::process::geteuid().as_raw();
        assert!(peer_is(&a, me));
        assert!(!peer_is(&a, me + 1));
    }

    #[test]
    fn keys_differ_by_what_changes_an_evaluation() {
        let base = DaemonKey::for_config(&EngineConfig::default()).unwrap();
        let preload =
            DaemonKey::for_config(&EngineConfig { preload: vec!["stats4".into()], ..EngineConfig::default() }).unwrap();
        let no_ns = DaemonKey::for_config(&EngineConfig { namespaces: false, ..EngineConfig::default() }).unwrap();
        assert_ne!(base.name(), preload.name());
        assert_ne!(base.name(), no_ns.name());
        assert_eq!(base.name(), DaemonKey::for_config(&EngineConfig::default()).unwrap().name());
        let audited = EngineConfig { audit_log: Some("/tmp/x".into()), ..EngineConfig::default() };
        assert!(DaemonKey::for_config(&audited).is_none(), "an audit log is the invocation's own");
    }
}
