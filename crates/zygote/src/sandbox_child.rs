//! The sandbox child: runs right after the zygote's fork, locks itself down, evaluates
//! one request, reports, and `_exit`s (never R's exit hooks, which would clean up state
//! shared with the zygote).
//!
//! fds on entry (received from the supervisor): channel, stdout, stderr, violation pipe.
//! They are moved to 3, 1, 2 and 4; stdin becomes /dev/null; everything else is closed
//! by the lockdown.

use crate::embedded_r::{reinit_temp_dir, EmbeddedR};
use crate::r_api;
use crate::workspace_files::{self, PLOT_DIR};
use base64::Engine as _;
use lockdown::root_template::RootTemplate;
use lockdown::{Policy, SeccompFilters};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use wire::child_link::{HostLink, CHILD_CHANNEL_FD};
use wire::messages::{ChildReport, ChildRequest, ToolStub};
use wire::names::is_r_identifier;
use wire::zygote_link::SpawnFds;

const VIOLATION: RawFd = 4;
/// Exit status when the lockdown failed (the report says why).
const SETUP_FAILED: i32 = 126;
/// Where libcurl (and the programs R runs) look for a proxy, lower case first.
const PROXY_VARIABLES: [&str; 4] = ["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"];
/// Largest plot file returned.
const MAX_PLOT_BYTES: u64 = 16 << 20;

/// What the supervisor asked for this child.
pub struct ChildSpec<'a> {
    /// The lockdown to apply.
    pub policy: &'a Policy,
    /// Its workspace.
    pub workspace: &'a Path,
    /// Its whole environment.
    pub env: &'a [(String, String)],
    /// Host tools to define.
    pub tools: &'a [ToolStub],
    /// Evaluate once before the lockdown (see `ZygoteRequest::Spawn`).
    pub warm_up: bool,
}

/// The child's whole life. Never returns.
pub fn run(
    r: &EmbeddedR,
    spec: ChildSpec<'_>,
    fds: SpawnFds<OwnedFd>,
    (filters, root): (&SeccompFilters, Option<&RootTemplate>),
    zygote: libc::pid_t,
) -> ! {
    let ChildSpec { policy, workspace, env, tools, warm_up } = spec;
    if let Err(e) = restore_signals() {
        // Nothing is arranged yet: the exit status is all the supervisor will see.
        eprintln!("rsandbox child: failed to restore signal handling: {e}");
        lockdown_exit(SETUP_FAILED);
    }
    // Before the fds are arranged: stdout is still the zygote's (/dev/null), so nothing
    // the warm-up prints reaches the first request's output.
    let warmed = if warm_up { evaluate_once(r, &workspace.join(PLOT_DIR)) } else { Ok(()) };
    if let Err(e) = arrange_fds(fds) {
        // The channel may not be in place yet; the exit status still tells the supervisor.
        eprintln!("rsandbox child: failed to arrange fds: {e}");
        lockdown_exit(SETUP_FAILED);
    }
    if let Err(e) = warmed {
        report_and_exit(
            &ChildReport::SetupFailed { error: format!("a new sandbox failed its warm-up: {e}") },
            SETUP_FAILED,
        );
    }
    if let Err(e) = prepare_environment(workspace, env) {
        report_and_exit(
            &ChildReport::SetupFailed { error: format!("failed to prepare the workspace: {e}") },
            SETUP_FAILED,
        );
    }
    let mut policy = policy.clone();
    policy.keep_fds_below = VIOLATION + 1;
    policy.violation_fd = Some(VIOLATION);
    let started = std::time::Instant::now();
    let applied = match lockdown::apply_with_root(&policy, filters, zygote, root) {
        Ok(applied) => applied,
        Err(e) => {
            report_and_exit(&ChildReport::SetupFailed { error: lockdown::command::error_chain(&e) }, SETUP_FAILED)
        }
    };
    // Network by proxy: R's download functions (libcurl) and the programs R runs find
    // the supervisor's proxy in the environment. No credentials: the proxy knows its
    // sandbox by the listener, so there is nothing a later request could replay.
    if let Some(port) = applied.proxy_port {
        let proxy = format!("http://127.0.0.1:{port}");
        for key in PROXY_VARIABLES {
            // SAFETY: single-threaded process; nothing holds pointers into environ.
            unsafe { std::env::set_var(key, &proxy) };
        }
    }
    // From here on everything runs locked down, as the sandbox's own identity: files
    // made now belong to it (made earlier, as root, it could not write them).
    if let Err(e) = make_private_dirs(workspace) {
        report_and_exit(
            &ChildReport::SetupFailed { error: format!("failed to prepare the workspace: {e}") },
            SETUP_FAILED,
        );
    }
    install_quit_hook();
    if let Err(e) = define_tools(r, tools) {
        report_and_exit(&ChildReport::SetupFailed { error: format!("failed to define tools: {e}") }, SETUP_FAILED);
    }
    write_report(&ChildReport::LockedDown { applied, lockdown_us: started.elapsed().as_micros() as u64 });
    let plot_dir = workspace.join(PLOT_DIR);
    // One request after another until the supervisor closes the channel (or kills us):
    // a one-shot evaluation is a session of one request.
    loop {
        match host().next_request() {
            Ok(Some(ChildRequest::Eval { code, stream, args, echo, functions, globals, typed })) => {
                if !args.is_empty() {
                    set_command_args(&args);
                }
                crate::request_values::set(globals, typed);
                let report = match functions.map(|names| allow_functions(r, &names)) {
                    Some(Err(refusal)) => refused(refusal),
                    _ => evaluate(r, &code, &plot_dir, stream, echo),
                };
                write_report(&report)
            }
            Ok(Some(ChildRequest::PutFile { path, data_base64 })) => {
                let written = base64::engine::general_purpose::STANDARD
                    .decode(data_base64)
                    .map_err(|e| format!("data_base64 is not base64: {e}"))
                    .and_then(|data| workspace_files::put(workspace, &path, &data));
                write_report(&match written {
                    Ok(size) => ChildReport::FileWritten { size },
                    Err(error) => ChildReport::Refused { error },
                })
            }
            Ok(Some(ChildRequest::GetFile { path, max_bytes })) => {
                write_report(&match workspace_files::get(workspace, &path, max_bytes) {
                    Ok(data) => ChildReport::FileContent {
                        size: data.len() as u64,
                        data_base64: base64::engine::general_purpose::STANDARD.encode(data),
                    },
                    Err(error) => ChildReport::Refused { error },
                })
            }
            Ok(Some(ChildRequest::ListFiles)) => write_report(&match workspace_files::list(workspace) {
                Ok((files, truncated)) => ChildReport::FileList { files, truncated },
                Err(error) => ChildReport::Refused { error },
            }),
            Ok(Some(ChildRequest::Snapshot)) => write_report(&snapshot(r, &plot_dir)),
            Ok(Some(ChildRequest::Restore { data_base64 })) => write_report(&restore(r, &plot_dir, &data_base64)),
            // A pre-forked child becoming a session's: its tools arrive now.
            Ok(Some(ChildRequest::DefineTools { tools })) => match define_tools(r, &tools) {
                Ok(()) => write_report(&ChildReport::ToolsDefined),
                Err(error) => report_and_exit(&ChildReport::ToolsFailed { error }, SETUP_FAILED),
            },
            // Idle with nobody waiting for it: the warm-up's garbage collected, so that the
            // first request allocates into pages this child has copied already.
            Ok(Some(ChildRequest::Settle)) => match r.call("rsandbox_collect_young", &[]) {
                Ok(_) => write_report(&ChildReport::Settled),
                Err(e) => report_and_exit(
                    &ChildReport::SetupFailed { error: format!("the collection after the warm-up failed: {e}") },
                    SETUP_FAILED,
                ),
            },
            // The supervisor closed the channel: the normal end.
            Ok(None) => lockdown_exit(0),
            // A reply with no call pending, or a broken channel: the supervisor kills us
            // anyway; saying why helps whoever reads its log.
            Ok(Some(other)) => {
                eprintln!("rsandbox child: expected a request, got {}", other.tag());
                lockdown_exit(SETUP_FAILED)
            }
            Err(e) => {
                eprintln!("rsandbox child: {e}");
                lockdown_exit(SETUP_FAILED)
            }
        }
    }
}

/// Set the function allowlist (once per child; later calls change nothing). Names that
/// exist nowhere in this R are an error: a typo would otherwise shrink the list silently.
fn allow_functions(r: &EmbeddedR, names: &[String]) -> Result<(), String> {
    let missing = r
        .call("rsandbox_allow", &[&names.join("\n")])
        .map_err(|e| format!("the function allowlist could not be set: {e}"))?;
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("the function allowlist names what does not exist in this R: {}", missing.join(", ")))
    }
}

/// An evaluation refused before it ran (as the R side reports its own refusals).
fn refused(message: String) -> ChildReport {
    let (cpu_ms, max_rss_kb) = own_usage();
    let r = serde_json::json!({"status": "refused", "value": null, "visible": false, "messages": [], "warnings": [],
        "error": {"message": message, "call": null}, "syntax_error": null});
    ChildReport::Evaluated { r, plots: Vec::new(), cpu_ms, max_rss_kb }
}

fn evaluate(r: &EmbeddedR, code: &str, plot_dir: &Path, stream: bool, echo: bool) -> ChildReport {
    let r_result = if code.contains('\0') {
        Err("code contains a NUL byte".to_string())
    } else {
        let flag = |on: bool| if on { "1" } else { "0" };
        interruptible(|| r.call("rsandbox_eval", &[code, &plot_dir.to_string_lossy(), flag(stream), flag(echo)]))
            .map_err(|e| e.to_string())
            .and_then(|out| out.into_iter().next().ok_or_else(|| "rsandbox_eval returned nothing".into()))
    };
    flush_stdio();
    let (cpu_ms, max_rss_kb) = own_usage();
    let mut r = r_result.and_then(|json| serde_json::from_str(&json).map_err(|e| e.to_string())).unwrap_or_else(|e| {
        // An internal failure of the evaluator, reported as an R-side error.
        serde_json::json!({"status": "error", "value": null, "visible": false, "messages": [],
            "warnings": [], "error": {"message": format!("rsandbox evaluator failed: {e}"), "call": null},
            "syntax_error": null})
    });
    // The plot directory is read only when something may have drawn into it: eval.R says
    // so in `plotted` (a device of R's own `options(device)` opened by this request, or a
    // forked worker that may have opened its own), which is not part of the result. Listing
    // it costs five system calls and a Landlock path walk otherwise (50-70 µs of a fresh
    // evaluation on an idle machine). Without the key (an internal failure) it is read.
    let plotted = r.as_object_mut().and_then(|fields| fields.remove("plotted"));
    let plots = if plotted != Some(serde_json::Value::Bool(false)) { take_plots(plot_dir) } else { Vec::new() };
    ChildReport::Evaluated { r, plots, cpu_ms, max_rss_kb }
}

/// The warm-up: `1 + 1` evaluated and printed as a request would be (printing touches
/// code and data an invisible result does not), its result checked and discarded. It runs
/// before the lockdown, our own constant code: what it copies (R's heap and interpreter
/// state the evaluation path writes) is the same there.
fn evaluate_once(r: &EmbeddedR, plot_dir: &Path) -> Result<(), String> {
    crate::request_values::set(serde_json::Map::new(), false);
    match evaluate(r, "1 + 1", plot_dir, false, true) {
        ChildReport::Evaluated { r, .. } if r["status"] == "ok" => Ok(()),
        ChildReport::Evaluated { r, .. } => Err(format!("1 + 1 gave {r}")),
        other => Err(format!("1 + 1 gave {}", other.tag())),
    }
}

/// What `commandArgs()` returns from now on: R's own options, then `--args` and `args`.
fn set_command_args(args: &[String]) {
    let all: Vec<std::ffi::CString> = ["R", "--no-echo", "--no-restore", "--args"]
        .iter()
        .map(|s| s.to_string())
        .chain(args.iter().map(|a| a.replace('\0', "")))
        .map(|a| std::ffi::CString::new(a).expect("NULs removed"))
        .collect();
    let mut argv: Vec<*mut libc::c_char> = all.iter().map(|a| a.as_ptr() as *mut libc::c_char).collect();
    // SAFETY: R's thread, between evaluations; R copies the strings into its own
    // character vector before returning, so `all` may go afterwards.
    unsafe { r_api::R_set_command_line_arguments(argv.len() as i32, argv.as_mut_ptr()) };
}

/// Where a snapshot is written and read: the harness's own directory, never listed.
fn snapshot_file(plot_dir: &Path) -> std::path::PathBuf {
    plot_dir.join("snapshot.rds")
}

fn snapshot(r: &EmbeddedR, plot_dir: &Path) -> ChildReport {
    let file = snapshot_file(plot_dir);
    let saved = r.call("rsandbox_snapshot", &[&file.to_string_lossy()]).map_err(|e| e.to_string());
    let data = saved.and_then(|not_saved| {
        let bytes = std::fs::read(&file).map_err(|e| format!("cannot read the snapshot: {e}"))?;
        Ok((bytes, not_saved))
    });
    // Whatever happened, the file goes: it is the session's state, not a user file.
    std::fs::remove_file(&file).ok();
    match data {
        Ok((bytes, not_saved)) => {
            ChildReport::Snapshot { data_base64: base64::engine::general_purpose::STANDARD.encode(bytes), not_saved }
        }
        Err(error) => ChildReport::Refused { error: format!("snapshot failed: {error}") },
    }
}

fn restore(r: &EmbeddedR, plot_dir: &Path, data_base64: &str) -> ChildReport {
    let file = snapshot_file(plot_dir);
    let restored = base64::engine::general_purpose::STANDARD
        .decode(data_base64)
        .map_err(|e| format!("the snapshot is not base64: {e}"))
        .and_then(|bytes| std::fs::write(&file, bytes).map_err(|e| format!("cannot write the snapshot: {e}")))
        .and_then(|()| r.call("rsandbox_restore", &[&file.to_string_lossy()]).map_err(|e| e.to_string()));
    std::fs::remove_file(&file).ok();
    match restored {
        Ok(warnings) => ChildReport::Restored { warnings },
        Err(error) => ChildReport::Refused { error: format!("restore failed: {error}") },
    }
}

/// CPU and peak memory of this process and the children it has waited for.
fn own_usage() -> (u64, u64) {
    // libc: rustix has no getrusage.
    let get = |who| {
        // SAFETY: a zeroed rusage is a valid out-parameter for getrusage.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `u` is writable and correctly sized.
        unsafe { libc::getrusage(who, &mut u) };
        u
    };
    let (me, kids) = (get(libc::RUSAGE_SELF), get(libc::RUSAGE_CHILDREN));
    let ms = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
    let cpu = ms(me.ru_utime) + ms(me.ru_stime) + ms(kids.ru_utime) + ms(kids.ru_stime);
    (cpu, me.ru_maxrss.max(kids.ru_maxrss) as u64)
}

/// Tool and argument names are pasted into R code (by `define_tools` below): syntactic
/// names only. The zygote runs the same check before it forks for a spawn request.
pub fn check_tools(tools: &[ToolStub]) -> Result<(), String> {
    match tools.iter().find(|t| !is_r_identifier(&t.name) || !t.args.iter().all(|a| is_r_identifier(a))) {
        Some(t) => Err(format!("invalid tool or argument name in {:?}", t.name)),
        None => Ok(()),
    }
}

fn define_tools(r: &EmbeddedR, tools: &[ToolStub]) -> Result<(), String> {
    if tools.is_empty() {
        return Ok(());
    }
    // Checked by the zygote before the fork too; `DefineTools` arrives after it.
    check_tools(tools)?;
    let quote = |s: &str| format!("\"{s}\"");
    let mut entries = Vec::new();
    for tool in tools {
        let args = tool.args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(", ");
        entries.push(format!("{} = c({args})", quote(&tool.name)));
    }
    r.eval_strings(&format!("rsandbox_define_tools(list({}))", entries.join(", "))).map(drop).map_err(|e| e.to_string())
}

/// The child's channel to the supervisor.
pub fn host() -> HostLink {
    // SAFETY: `arrange_fds` put the channel on CHILD_CHANNEL_FD before anything calls
    // this, and nothing in the child closes it (the lockdown keeps fds below 5).
    unsafe { HostLink::on_fd(CHILD_CHANNEL_FD) }
}

/// Send a report; exits when the supervisor is gone.
pub fn write_report(report: &ChildReport) {
    // A supervisor that stopped listening learns the outcome from the exit status.
    if host().report(report).is_err() {
        lockdown_exit(SETUP_FAILED);
    }
}

fn report_and_exit(report: &ChildReport, code: i32) -> ! {
    write_report(report);
    lockdown_exit(code)
}

fn lockdown_exit(code: i32) -> ! {
    flush_stdio();
    // libc: rustix ends a process only in its `runtime` feature (for libc replacements).
    // SAFETY: _exit skips atexit handlers and R's clean-up, which belong to the zygote.
    unsafe { libc::_exit(code) }
}

fn flush_stdio() {
    // SAFETY: fflush(NULL) flushes every open C stream (R prints through stdio).
    unsafe { libc::fflush(std::ptr::null_mut()) };
}

/// The zygote blocks SIGCHLD (for its signalfd), Rust ignores SIGPIPE and handles
/// SIGSEGV/SIGBUS (stack-overflow reports); the child must look like an ordinary process
/// to R and to what R forks, and must die of a crash so the crash can be reported.
fn restore_signals() -> io::Result<()> {
    // libc: rustix sets signal masks and handlers only in its `runtime` feature, which is
    // for programs that replace libc (and R, in this process, uses libc's).
    // SAFETY: a zeroed sigset_t is valid storage for sigemptyset to initialise.
    let mut empty: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `empty` is a valid sigset_t; the mask and dispositions belong to this
    // single-threaded process.
    let rc = unsafe {
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    for signal in [libc::SIGPIPE, libc::SIGCHLD, libc::SIGSEGV, libc::SIGBUS] {
        // SAFETY: SIG_DFL for a catchable signal; no handler code is involved.
        if unsafe { libc::signal(signal, libc::SIG_DFL) } == libc::SIG_ERR {
            return Err(io::Error::last_os_error());
        }
    }
    // SIGINT is how the supervisor interrupts an evaluation (Ctrl-C in a console). R's
    // own handlers are off in the embedding, so ours asks R to raise an interrupt at its
    // next check. No SA_RESTART: a blocking call such as Sys.sleep's wait returns EINTR
    // and R looks at the flag at once.
    // SAFETY: a zeroed sigaction is valid; the handler only stores an int, which is
    // async-signal-safe; the mask is initialised by sigemptyset before use.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigint as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether user code is being evaluated: a SIGINT outside an evaluation (one that
/// arrives as the evaluation ends) is dropped, or R would raise it inside the next request.
static EVALUATING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    if EVALUATING.load(std::sync::atomic::Ordering::SeqCst) {
        // SAFETY: a plain store to R's flag; R reads it on its own thread at its next
        // interrupt check (this process has no other thread running R).
        unsafe { r_api::R_interrupts_pending = 1 };
    }
}

/// Run `f` (an evaluation of user code) with interrupts delivered; afterwards no
/// interrupt stays pending.
fn interruptible<T>(f: impl FnOnce() -> T) -> T {
    use std::sync::atomic::Ordering::SeqCst;
    EVALUATING.store(true, SeqCst);
    let out = f();
    EVALUATING.store(false, SeqCst);
    // SAFETY: R's own thread, between evaluations; the handler no longer stores.
    unsafe { r_api::R_interrupts_pending = 0 };
    out
}

/// Move [channel, stdout, stderr, violation] to 3, 1, 2, 4 and stdin to /dev/null.
fn arrange_fds(fds: SpawnFds<OwnedFd>) -> io::Result<()> {
    let fds = [fds.control, fds.stdout, fds.stderr, fds.violations];
    // libc: the targets are fixed numbers nothing owns yet, and rustix's `dup2` takes its
    // target as an `OwnedFd`.
    let check = |rc: libc::c_int| if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc) };
    // First lift every fd above the targets so no dup2 below clobbers one not yet moved.
    let mut lifted = Vec::new();
    for fd in &fds {
        // SAFETY: duplicating an fd we own.
        lifted.push(check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) })?);
    }
    drop(fds);
    for (from, to) in lifted.iter().zip([CHILD_CHANNEL_FD, 1, 2, VIOLATION]) {
        // SAFETY: dup2 onto a fixed low fd number; both are valid fds.
        check(unsafe { libc::dup2(*from, to) })?;
    }
    let devnull = File::open("/dev/null")?;
    // SAFETY: as above.
    check(unsafe { libc::dup2(devnull.as_raw_fd(), 0) })?;
    Ok(())
}

/// Workspace as cwd, HOME and TMPDIR; the environment replaced whole.
fn prepare_environment(workspace: &Path, env: &[(String, String)]) -> io::Result<()> {
    std::env::set_current_dir(workspace)?;
    // SAFETY: single-threaded process; nothing holds pointers into environ.
    if unsafe { libc::clearenv() } != 0 {
        return Err(io::Error::other("clearenv failed: the zygote's environment would leak"));
    }
    for (key, value) in env {
        // SAFETY: as above (set_var is unsafe only because of other threads).
        unsafe { std::env::set_var(key, value) };
    }
    Ok(())
}

/// R's tempdir (under $TMPDIR, the workspace) and the plot directory.
fn make_private_dirs(workspace: &Path) -> io::Result<()> {
    std::fs::create_dir_all(workspace.join(PLOT_DIR))?;
    reinit_temp_dir();
    Ok(())
}

/// Read (and remove) the PNGs the code drew, in order. The child is locked down, so a
/// symlink planted in the plot dir can only lead to what the sandbox may read anyway.
fn take_plots(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    names.sort();
    names
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .filter_map(|p| {
            let mut bytes = Vec::new();
            File::open(p).ok()?.take(MAX_PLOT_BYTES).read_to_end(&mut bytes).ok()?;
            // Gone once reported, so the next request in a session reports only its own.
            std::fs::remove_file(p).ok();
            Some(base64::engine::general_purpose::STANDARD.encode(bytes))
        })
        .collect()
}

/// R's clean-up hook (`q()`/`quit()` end here): report the status and leave without
/// running R's clean-up, which would delete state the zygote shares.
pub unsafe extern "C" fn on_quit(_save: libc::c_int, status: libc::c_int, _run_last: libc::c_int) {
    flush_stdio();
    report_and_exit(&ChildReport::Quit { status }, 0)
}

/// Install [`on_quit`] as R's clean-up hook.
pub fn install_quit_hook() {
    // SAFETY: R is initialised; replacing a function pointer R reads only when quitting.
    unsafe { r_api::ptr_R_CleanUp = Some(on_quit) };
}
