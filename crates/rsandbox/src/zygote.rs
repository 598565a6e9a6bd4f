//! The supervisor's handle on a zygote process: start it with a clean environment, send
//! spawn requests, and route its events to the evaluation waiting for them.

use crate::errors::EngineError;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use wire::messages::{ZygoteEvent, ZygoteRequest};
use wire::zygote_link::{SpawnFds, StartUp, ZygoteLink};

/// What the zygote reported at start-up.
#[derive(Clone, Debug)]
pub struct ZygoteInfo {
    /// `R.version.string`.
    pub r_version: String,
    /// `R.home()`.
    pub r_home: PathBuf,
    /// `.libPaths()`.
    pub library_paths: Vec<PathBuf>,
    /// R's own trees outside `r_home` (`R_SHARE_DIR`, `R_DOC_DIR`, `R_INCLUDE_DIR`).
    pub r_directories: Vec<(String, PathBuf)>,
    /// Packages preloaded.
    pub preloaded: Vec<String>,
    /// The zygote's pid.
    pub pid: u32,
}

/// An event for one spawn request, with the pidfd when it is `Spawned`.
pub type Routed = (ZygoteEvent, Option<OwnedFd>);

type Routes = Arc<Mutex<HashMap<u64, Sender<Routed>>>>;

/// Called by the event thread after it has passed on a child's `Exited` report, and once
/// more when the zygote stops: how the engine's reaper learns that a retired child is
/// gone without the request that retired it waking anyone ([`Zygote::on_child_exit`]).
pub type ExitHook = Arc<dyn Fn() + Send + Sync>;

/// A running zygote.
pub struct Zygote {
    link: Arc<ZygoteLink>,
    process: Arc<Mutex<std::process::Child>>,
    routes: Routes,
    alive: Arc<AtomicBool>,
    next_req: AtomicU64,
    info: ZygoteInfo,
    /// Its PSS per resident byte: its children's meters start from it.
    pss_share: crate::meter::PssShare,
    exit_hook: Arc<OnceLock<ExitHook>>,
}

/// Where `rsandbox-zygote` is: explicit path, `$RSANDBOX_ZYGOTE`, or beside this
/// executable (or one directory up, for test binaries in `target/*/deps`).
pub fn locate_zygote(explicit: Option<&Path>) -> Result<PathBuf, EngineError> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("RSANDBOX_ZYGOTE") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(EngineError::io("find the current executable"))?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    [dir.join("rsandbox-zygote"), dir.join("../rsandbox-zygote")].into_iter().find(|p| p.is_file()).ok_or_else(|| {
        EngineError::ZygoteStart(format!(
            "rsandbox-zygote not found beside {}; set RSANDBOX_ZYGOTE or build it (cargo build -p rsandbox-zygote)",
            exe.display()
        ))
    })
}

/// The only variables the zygote (and so every child) starts from. `TMPDIR` is inside
/// the engine's workspace root, so R's start-up temp dir goes with the engine (the
/// zygote is killed, never runs R's clean-up).
fn zygote_environment(tmpdir: &Path, libraries: &[PathBuf]) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".to_string(), "/usr/bin:/bin".to_string()),
        ("LANG".to_string(), "C.UTF-8".to_string()),
        ("TZ".to_string(), std::env::var("TZ").unwrap_or_else(|_| "UTC".into())),
        // One thread: the zygote must stay single-threaded to fork safely.
        ("OPENBLAS_NUM_THREADS".to_string(), "1".to_string()),
        ("OMP_NUM_THREADS".to_string(), "1".to_string()),
        ("MKL_NUM_THREADS".to_string(), "1".to_string()),
        // Huge pages for malloc: fewer page-table entries to copy at each fork.
        ("GLIBC_TUNABLES".to_string(), "glibc.malloc.hugetlb=1".to_string()),
        ("TMPDIR".to_string(), tmpdir.to_string_lossy().into_owned()),
    ];
    if let Ok(home) = std::env::var("R_HOME") {
        env.push(("R_HOME".into(), home));
    }
    // A profile's extra libraries, searched first (R puts R_LIBS before the site and
    // system libraries); they become readable in the sandboxes as every library does.
    if !libraries.is_empty() {
        let joined: Vec<String> = libraries.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        env.push(("R_LIBS".into(), joined.join(":")));
    }
    env
}

impl Zygote {
    /// Start a zygote and wait until R is up (or report why it is not).
    pub fn start(
        binary: &Path,
        preload: &[String],
        libraries: &[PathBuf],
        warm: bool,
        tmpdir: &Path,
    ) -> Result<Zygote, EngineError> {
        let (link, theirs) = ZygoteLink::pair().map_err(|e| EngineError::ZygoteStart(e.to_string()))?;
        let theirs_fd = theirs.as_raw_fd();
        let mut command = Command::new(binary);
        if !preload.is_empty() {
            command.arg("--preload").arg(preload.join(","));
        }
        if !warm {
            command.arg("--no-warm");
        }
        command.env_clear().envs(zygote_environment(tmpdir, libraries)).current_dir("/");
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::inherit());
        // libc, not rustix: rustix's `dup2` takes the target as an `OwnedFd`, and fd 3 here
        // is a number nothing owns until the exec.
        // SAFETY: the closure runs between fork and exec and only calls dup2/fcntl, which
        // are async-signal-safe.
        unsafe {
            command.pre_exec(move || {
                // dup2 onto itself would keep close-on-exec set; clear it explicitly then.
                let rc = if theirs_fd == 3 { libc::fcntl(3, libc::F_SETFD, 0) } else { libc::dup2(theirs_fd, 3) };
                if rc < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let process = command
            .spawn()
            .map_err(|e| EngineError::ZygoteStart(format!("failed to run {}: {e}", binary.display())))?;
        drop(theirs);
        let pid = process.id();
        let info = match link.await_start_up() {
            Ok(StartUp::Ready(r)) => ZygoteInfo {
                r_version: r.r_version,
                r_home: r.r_home,
                library_paths: r.library_paths,
                r_directories: r.r_directories,
                preloaded: r.preloaded,
                pid,
            },
            Ok(StartUp::Failed(error)) => return Err(EngineError::ZygoteStart(error)),
            Err(e) => return Err(EngineError::ZygoteStart(format!("during start-up: {e}"))),
        };
        let link = Arc::new(link);
        let routes: Routes = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let process = Arc::new(Mutex::new(process));
        let exit_hook: Arc<OnceLock<ExitHook>> = Arc::default();
        spawn_router(link.clone(), routes.clone(), alive.clone(), process.clone(), exit_hook.clone());
        let pss_share = crate::meter::PssShare::of_zygote(info.pid as i32);
        Ok(Zygote { link, process, routes, alive, next_req: AtomicU64::new(1), info, pss_share, exit_hook })
    }

    /// Call `hook` after each child's exit report is passed on, and when the zygote stops
    /// (set once; a second hook is ignored).
    pub fn on_child_exit(&self, hook: ExitHook) {
        let _ = self.exit_hook.set(hook);
    }

    /// What the zygote reported at start-up.
    pub fn info(&self) -> &ZygoteInfo {
        &self.info
    }

    /// What its children's meters start from.
    pub fn pss_share(&self) -> &crate::meter::PssShare {
        &self.pss_share
    }

    /// Whether the zygote is still serving.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Ask for a child. Returns the request id and the stream of events for it
    /// (`Spawned` with a pidfd, or `SpawnFailed`; later `Exited`).
    pub fn spawn(
        &self,
        request: impl FnOnce(u64) -> ZygoteRequest,
        fds: SpawnFds<BorrowedFd<'_>>,
    ) -> Result<(u64, Receiver<Routed>), EngineError> {
        if !self.is_alive() {
            return Err(EngineError::ZygoteGone("it exited earlier".into()));
        }
        let req = self.next_req.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = channel();
        self.routes.lock().expect("routes").insert(req, tx);
        if let Err(e) = self.link.request_spawn(&request(req), fds) {
            self.routes.lock().expect("routes").remove(&req);
            return Err(EngineError::ZygoteGone(format!("failed to send to the zygote: {e}")));
        }
        Ok((req, rx))
    }

    /// Forget a request (its evaluation is over).
    pub fn forget(&self, req: u64) {
        self.routes.lock().expect("routes").remove(&req);
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        self.alive.store(false, Ordering::SeqCst);
        // The zygote kills its children's groups when the channel closes; make sure it
        // is gone even if it does not notice.
        let mut process = self.process.lock().expect("zygote process");
        if process.kill().is_ok() {
            // Reaping cannot fail for our own killed child in any way we could act on.
            process.wait().ok();
        }
    }
}

fn spawn_router(
    link: Arc<ZygoteLink>,
    routes: Routes,
    alive: Arc<AtomicBool>,
    process: Arc<Mutex<std::process::Child>>,
    exit_hook: Arc<OnceLock<ExitHook>>,
) {
    let exited = move || {
        if let Some(hook) = exit_hook.get() {
            hook();
        }
    };
    std::thread::Builder::new()
        .name("rsandbox-zygote-events".into())
        .spawn(move || {
            loop {
                let (event, fd) = match link.next_event() {
                    Ok(Some(e)) => e,
                    Ok(None) => break,
                    // A zygote that breaks protocol is not trusted to serve again.
                    Err(e) => {
                        crate::note!("rsandbox: {e}");
                        break;
                    }
                };
                let req = match &event {
                    ZygoteEvent::Spawned { req, .. }
                    | ZygoteEvent::SpawnFailed { req, .. }
                    | ZygoteEvent::Exited { req, .. } => *req,
                    other => {
                        crate::note!(
                            "rsandbox: expected an event for a spawn request from the zygote, got {}",
                            other.tag()
                        );
                        break;
                    }
                };
                let is_exit = matches!(event, ZygoteEvent::Exited { .. });
                let route = routes.lock().expect("routes").get(&req).cloned();
                if let Some(tx) = route {
                    // The evaluation may have given up (timeout); then nobody needs this.
                    tx.send((event, fd)).ok();
                }
                if is_exit {
                    exited();
                }
            }
            let was_alive = alive.swap(false, Ordering::SeqCst);
            // Tell the operator why, unless we are the ones who stopped it (Drop).
            if was_alive {
                std::thread::sleep(std::time::Duration::from_millis(50));
                let status = process.lock().expect("zygote process").try_wait();
                crate::note!("rsandbox: the zygote stopped serving ({status:?}); it is restarted on the next request");
            }
            // Dropping the senders wakes every waiting evaluation with "disconnected".
            routes.lock().expect("routes").clear();
            exited();
        })
        .expect("failed to start the zygote event thread");
}
