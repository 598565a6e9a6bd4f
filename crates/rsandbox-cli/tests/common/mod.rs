//! Shared helpers for the CLI integration tests: the unprivileged test user, copies of
//! the binaries that user can run, running the CLI as root or as that user, JSON parsing,
//! planted secrets and the scan for processes a sandbox left behind.
//!
//! The tests must run as root (they create a user and switch to it). Build everything
//! first with `cargo build`: `cargo test -p rsandbox-cli` builds `rsandbox` but not
//! `rsandbox-zygote`, which lives in another package.

#![allow(dead_code)]

use serde_json::Value;
pub mod cli_under_test;
pub mod container;
pub mod cran;
pub mod engine_dirs;
pub mod http_server;
pub use container::*;
use std::fmt;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// The unprivileged account the `::as_user` variants run as.
pub const TEST_USER: &str = "rsandbox-test";
/// Its home directory.
pub const TEST_HOME: &str = "/home/rsandbox-test";
/// When started as root, every sandbox runs under a uid from this value up.
pub const SANDBOX_UID_BASE: u32 = 2_000_000_000;
/// The longest any single CLI call may take before the test kills it.
const CALL_LIMIT: Duration = Duration::from_secs(90);

/// Who runs the CLI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// The test process itself (root).
    Root,
    /// The unprivileged [`TEST_USER`].
    User,
}

/// Expand one scenario into two tests, `<name>::as_root` and `<name>::as_user`:
///
/// ```ignore
/// both!(fn lm_coefficients(who) { ... });
/// ```
// Not every test file that shares these helpers runs as both users.
#[allow(unused_macros)]
macro_rules! both {
    ($(#[$meta:meta])* fn $name:ident($who:ident) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn scenario($who: crate::common::Who) $body

            #[test]
            fn as_root() {
                scenario(crate::common::Who::Root)
            }

            #[test]
            fn as_user() {
                scenario(crate::common::Who::User)
            }
        }
    };
}

// ---------------------------------------------------------------------------------------
// Serialising tests that look for leftover processes.
// ---------------------------------------------------------------------------------------

/// Every test holds this lock: ordinary tests share it, tests that assert that no
/// sandbox process is left take it exclusively. As root every CLI invocation runs its
/// sandbox under the same first uid of the range, and as the user every sandbox keeps
/// the user's uid, so a process scan is only meaningful while nothing else runs.
static PROCESS_LOCK: RwLock<()> = RwLock::new(());

/// Held by ordinary tests.
pub fn shared() -> RwLockReadGuard<'static, ()> {
    PROCESS_LOCK.read().unwrap_or_else(|e| e.into_inner())
}

/// Held by tests that scan for leftover processes.
pub fn exclusive() -> RwLockWriteGuard<'static, ()> {
    PROCESS_LOCK.write().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------------------
// The test user.
// ---------------------------------------------------------------------------------------

/// The test user's uid and gid.
#[derive(Clone, Copy, Debug)]
pub struct Account {
    pub uid: u32,
    pub gid: u32,
}

fn lookup_user() -> Option<Account> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 4 && fields[0] == TEST_USER)
            .then(|| Some(Account { uid: fields[2].parse().ok()?, gid: fields[3].parse().ok()? }))
            .flatten()
    })
}

/// Create [`TEST_USER`] (once per process; nothing happens if it exists) and return it.
pub fn test_user() -> Account {
    static USER: OnceLock<Account> = OnceLock::new();
    *USER.get_or_init(|| {
        assert_eq!(
            // SAFETY: geteuid cannot fail.
            unsafe { libc::geteuid() },
            0,
            "the rsandbox CLI tests must run as root (they create and switch to the user {TEST_USER})"
        );
        if lookup_user().is_none() {
            let out = Command::new("useradd")
                .args(["--create-home", "--shell", "/bin/bash", TEST_USER])
                .output()
                .expect("failed to run useradd");
            // Exit 9: created concurrently by another test process.
            assert!(
                out.status.success() || out.status.code() == Some(9),
                "useradd {TEST_USER} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let account = lookup_user().unwrap_or_else(|| panic!("{TEST_USER} missing from /etc/passwd after useradd"));
        assert_ne!(account.uid, 0, "{TEST_USER} must not be root");
        if !Path::new(TEST_HOME).is_dir() {
            fs::create_dir_all(TEST_HOME).expect("create the test user's home");
            std::os::unix::fs::chown(TEST_HOME, Some(account.uid), Some(account.gid)).expect("chown the home");
        }
        account
    })
}

/// Whether `uid` is one a sandbox started by `who` runs as.
pub fn is_sandbox_uid(who: Who, uid: u32) -> bool {
    match who {
        Who::Root => uid >= SANDBOX_UID_BASE,
        Who::User => uid == test_user().uid,
    }
}

// ---------------------------------------------------------------------------------------
// Binaries.
// ---------------------------------------------------------------------------------------

/// Copies of `rsandbox`, `rsandbox-server` (which runs `serve`, `mcp` and the daemon
/// for it) and `rsandbox-zygote` in a directory everyone can reach.
pub struct Binaries {
    pub dir: PathBuf,
    pub cli: PathBuf,
    pub server: PathBuf,
    pub zygote: PathBuf,
    /// Set when the zygote looks older than the sources it is built from.
    pub stale_note: Option<String>,
    counter: std::sync::atomic::AtomicU64,
}

const COPY_PREFIX: &str = "rsandbox-cli-tests-";

/// Remove directories earlier test runs left (their process is gone).
fn remove_stale_copies() {
    let Ok(entries) = fs::read_dir("/tmp") else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(COPY_PREFIX).and_then(|p| p.split('-').next()) else { continue };
        if !Path::new("/proc").join(pid).exists() {
            fs::remove_dir_all(entry.path()).ok();
        }
    }
}

/// Sources listed in cargo's dep-info file for `binary` that are newer than it: a zygote
/// built before the latest edits (`cargo test -p rsandbox-cli` does not rebuild it).
fn newer_sources(binary: &Path) -> Vec<PathBuf> {
    let Ok(built) = fs::metadata(binary).and_then(|m| m.modified()) else { return Vec::new() };
    let Ok(depinfo) = fs::read_to_string(binary.with_extension("d")) else { return Vec::new() };
    let Some(first) = depinfo.lines().next() else { return Vec::new() };
    let Some((_, deps)) = first.split_once(": ") else { return Vec::new() };
    deps.replace("\\ ", "\u{0}")
        .split_whitespace()
        .map(|p| PathBuf::from(p.replace('\u{0}', " ")))
        .filter(|p| fs::metadata(p).and_then(|m| m.modified()).is_ok_and(|t| t > built))
        .collect()
}

/// The binaries, copied once per test process.
pub fn binaries() -> &'static Binaries {
    static BINS: OnceLock<Binaries> = OnceLock::new();
    BINS.get_or_init(|| {
        let cli_src = cli_under_test::cli_under_test();
        let zygote_src = PathBuf::from(env!("CARGO_BIN_EXE_rsandbox")).with_file_name("rsandbox-zygote");
        assert!(
            zygote_src.is_file(),
            "{} is missing: `cargo test -p rsandbox-cli` does not build other packages' binaries; \
             run `cargo build` (or `cargo build -p rsandbox-zygote`) first",
            zygote_src.display()
        );
        let newer = newer_sources(&zygote_src);
        let stale_note = (!newer.is_empty()).then(|| {
            format!(
                "note: {} is older than {} of its sources (e.g. {}); run `cargo build` if results look odd",
                zygote_src.display(),
                newer.len(),
                newer[0].display()
            )
        });

        remove_stale_copies();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let dir = PathBuf::from(format!("/tmp/{COPY_PREFIX}{}-{nanos:08x}", std::process::id()));
        fs::create_dir(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod the binaries dir");
        let copy = |src: &Path| {
            let dst = dir.join(src.file_name().unwrap());
            fs::copy(src, &dst).unwrap_or_else(|e| panic!("copy {} to {}: {e}", src.display(), dst.display()));
            fs::set_permissions(&dst, fs::Permissions::from_mode(0o755)).expect("chmod a binary");
            dst
        };
        let cli = copy(&cli_src);
        let server = copy(Path::new(env!("CARGO_BIN_EXE_rsandbox-server")));
        let zygote = copy(&zygote_src);
        Binaries { dir, cli, server, zygote, stale_note, counter: Default::default() }
    })
}

/// Write `bytes` to a fresh file (mode 0644) both root and the test user can read.
pub fn fixture(name: &str, bytes: &[u8]) -> PathBuf {
    let bins = binaries();
    let n = bins.counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let path = bins.dir.join(format!("{n}-{name}"));
    fs::write(&path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod a fixture");
    path
}

// ---------------------------------------------------------------------------------------
// Running the CLI.
// ---------------------------------------------------------------------------------------

/// What one CLI call did.
pub struct Output {
    pub who: Who,
    /// The CLI's pid.
    pub pid: u32,
    pub args: Vec<String>,
    /// Exit status; `None` when killed by a signal.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Wall time of the whole process, measured by the test.
    pub elapsed: Duration,
}

fn clip(s: &str) -> String {
    const MAX: usize = 3000;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut cut = MAX;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… [{} bytes in all]", &s[..cut], s.len())
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let args: Vec<String> = self.args.iter().map(|a| clip(a)).collect();
        writeln!(f, "\n--- rsandbox {:?} as {:?}", args, self.who)?;
        writeln!(f, "exit code {:?}, signal {:?}, {:.3} s", self.code, self.signal, self.elapsed.as_secs_f64())?;
        writeln!(f, "stdout: {}", clip(&self.stdout))?;
        writeln!(f, "stderr: {}", clip(&self.stderr))?;
        if let Some(note) = &binaries().stale_note {
            writeln!(f, "{note}")?;
        }
        Ok(())
    }
}

impl Output {
    /// stdout as one JSON object (`--json`).
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):{self}"))
    }

    /// The last line of stderr as JSON (`exec --json` reports there).
    pub fn stderr_json(&self) -> Value {
        let line = self.stderr.lines().last().unwrap_or_default();
        serde_json::from_str(line).unwrap_or_else(|e| panic!("stderr's last line is not JSON ({e}):{self}"))
    }

    /// Assert the exit status.
    #[track_caller]
    pub fn assert_code(&self, expected: i32) -> &Self {
        assert_eq!(self.code, Some(expected), "unexpected exit status:{self}");
        self
    }
}

/// Run `rsandbox args…` as `who` with a clean environment.
pub fn rsandbox(who: Who, args: &[&str]) -> Output {
    rsandbox_with(who, args, &[], None)
}

/// Run `rsandbox args…` as `who` with extra environment variables and optional stdin.
pub fn rsandbox_with(who: Who, args: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>) -> Output {
    rsandbox_in(Place::Host, who, args, env, stdin)
}

/// Where a test runs the CLI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// This machine as it is.
    Host,
    /// Under a container runtime's default seccomp profile ([`in_container_default`]).
    ContainerDefault,
    /// As on a kernel without Landlock ([`without_landlock`]).
    NoLandlock,
    /// Where unprivileged user namespaces are refused ([`without_user_namespaces`]).
    NoUserNamespaces,
    /// In a chroot whose `/` is not a mount point ([`in_chroot`]; root only).
    Chroot,
    /// As a container's root without `CAP_SYS_ADMIN` where user namespaces are allowed
    /// ([`without_cap_sys_admin`]; root only).
    WithoutSysAdmin,
}

/// Run `rsandbox args…` as `who`, in `place`.
pub fn rsandbox_in(place: Place, who: Who, args: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>) -> Output {
    let bins = binaries();
    let mut command = Command::new(&bins.cli);
    match place {
        Place::Host => {}
        Place::ContainerDefault => in_container_default(&mut command),
        Place::NoLandlock => without_landlock(&mut command),
        Place::NoUserNamespaces => without_user_namespaces(&mut command),
        Place::Chroot => in_chroot(&mut command),
        Place::WithoutSysAdmin => without_cap_sys_admin(&mut command),
    }
    command.args(args).env_clear().current_dir("/");
    command.env("PATH", "/usr/local/bin:/usr/bin:/bin").env("LANG", "C.UTF-8");
    // Each scenario tests one invocation, which must leave nothing running: no daemon
    // (the daemon has tests of its own, which turn this off).
    command.env("RSANDBOX_NO_DAEMON", "1");
    match who {
        Who::Root => {
            command.env("HOME", "/root").env("USER", "root");
        }
        Who::User => {
            let account = test_user();
            command.env("HOME", TEST_HOME).env("USER", TEST_USER);
            // std calls setgroups(0, NULL) before setuid when it runs as root and no
            // groups were given; the hook below (which runs after the switch) checks that
            // no supplementary group and no root id is left.
            command.uid(account.uid).gid(account.gid);
            let (uid, gid) = (account.uid, account.gid);
            // SAFETY: the closure only calls getgroups/getresuid/getresgid, which are
            // async-signal-safe, and allocates nothing.
            unsafe {
                command.pre_exec(move || {
                    let groups = libc::getgroups(0, std::ptr::null_mut());
                    let (mut r, mut e, mut s) = (0, 0, 0);
                    let (mut rg, mut eg, mut sg) = (0, 0, 0);
                    libc::getresuid(&mut r, &mut e, &mut s);
                    libc::getresgid(&mut rg, &mut eg, &mut sg);
                    if groups != 0 || [r, e, s] != [uid; 3] || [rg, eg, sg] != [gid; 3] {
                        return Err(std::io::Error::from_raw_os_error(libc::EPERM));
                    }
                    Ok(())
                });
            }
        }
    }
    for (k, v) in env {
        command.env(k, v);
    }
    command.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    command.stdout(Stdio::piped()).stderr(Stdio::piped());

    let start = Instant::now();
    let mut child =
        command.spawn().unwrap_or_else(|e| panic!("failed to start {} as {who:?}: {e}", bins.cli.display()));
    let pid = child.id() as libc::pid_t;
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        let bytes = bytes.to_vec();
        std::thread::spawn(move || {
            pipe.write_all(&bytes).ok();
        });
    }
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let out_thread = std::thread::spawn(move || {
        let mut v = Vec::new();
        out_pipe.read_to_end(&mut v).ok();
        v
    });
    let err_thread = std::thread::spawn(move || {
        let mut v = Vec::new();
        err_pipe.read_to_end(&mut v).ok();
        v
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        tx.send(child.wait()).ok();
    });
    let status = match rx.recv_timeout(CALL_LIMIT) {
        Ok(status) => status.expect("wait for rsandbox"),
        Err(_) => {
            // SAFETY: signalling our own child, which has not been reaped yet (the
            // waiting thread is still blocked in wait).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("rsandbox {args:?} as {who:?} did not finish within {CALL_LIMIT:?}; killed it");
        }
    };
    let elapsed = start.elapsed();
    let stdout = String::from_utf8_lossy(&out_thread.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&err_thread.join().unwrap()).into_owned();
    Output {
        who,
        pid: pid as u32,
        args: args.iter().map(|s| s.to_string()).collect(),
        code: status.code(),
        signal: status.signal(),
        stdout,
        stderr,
        elapsed,
    }
}

/// `rsandbox eval --json [options…] code`, asserting stdout is one JSON object.
pub fn eval_json(who: Who, options: &[&str], code: &str) -> (Output, Value) {
    let mut args = vec!["eval", "--json"];
    args.extend_from_slice(options);
    args.push(code);
    let out = rsandbox(who, &args);
    let json = out.json();
    (out, json)
}

/// Run a program directly (not through rsandbox) as `who`; returns stdout.
pub fn run_directly(who: Who, program: &str, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(program);
    command.args(args).env_clear().env("PATH", "/usr/bin:/bin").current_dir("/");
    if who == Who::User {
        let account = test_user();
        command.uid(account.uid).gid(account.gid);
    }
    command.output().unwrap_or_else(|e| panic!("failed to run {program}: {e}"))
}

// ---------------------------------------------------------------------------------------
// Planted secrets.
// ---------------------------------------------------------------------------------------

/// The system log the paper's first unit test tries to read.
pub const SECRET_LOG: &str = "/var/log/rsandbox-test-secret.log";
/// Files with secrets in home directories and /tmp (all mode 0644).
pub const SECRET_FILES: [&str; 4] = [
    "/root/.ssh/rsandbox-test-secret",
    "/root/Documents/rsandbox-test-secret.txt",
    "/home/rsandbox-test/Documents/rsandbox-test-secret.txt",
    "/tmp/rsandbox-test-secret.txt",
];

/// Plant the secrets (once per process) and return the token they contain. The token is
/// random per test process, so a match cannot come from an earlier run's output.
pub fn planted_secret() -> &'static str {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN.get_or_init(|| {
        let account = test_user();
        let mut random = [0u8; 12];
        fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut random)).expect("read /dev/urandom");
        let token = format!("RSANDBOX-SECRET-{}", random.iter().map(|b| format!("{b:02x}")).collect::<String>());
        for path in std::iter::once(SECRET_LOG).chain(SECRET_FILES) {
            let path = Path::new(path);
            let parent = path.parent().unwrap();
            if !parent.exists() {
                fs::create_dir_all(parent).unwrap_or_else(|e| panic!("create {}: {e}", parent.display()));
                if parent.starts_with(TEST_HOME) {
                    std::os::unix::fs::chown(parent, Some(account.uid), Some(account.gid)).ok();
                }
            }
            fs::write(path, format!("password = {token}\n"))
                .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
            fs::set_permissions(path, fs::Permissions::from_mode(0o644)).expect("chmod a secret");
        }
        token
    })
}

// ---------------------------------------------------------------------------------------
// Leftover processes.
// ---------------------------------------------------------------------------------------

/// A process that belongs to a sandbox.
#[derive(Debug)]
pub struct Leftover {
    pub pid: u32,
    pub ppid: u32,
    pub zombie: bool,
    pub description: String,
}

/// Processes of sandboxes started by `who` through this test process's copy of the CLI:
/// their real, effective, saved or filesystem uid is a sandbox uid, and they are either
/// forks of our zygote copy (its path is their command line) or a program `exec` started
/// in the workspace of the CLI process `cli_pid` (`/tmp/rsandbox-<pid>-…` in its
/// environment). Other users of the machine (concurrent `cargo test` runs of the other
/// crates) also run sandboxes under these uids; they are not ours to judge.
pub fn sandbox_processes(who: Who, cli_pid: u32) -> Vec<Leftover> {
    let ours = binaries().dir.to_string_lossy().into_owned();
    let workspace_marker = format!("/rsandbox-{cli_pid}-");
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(status) = fs::read_to_string(entry.path().join("status")) else { continue };
        let field =
            |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).unwrap_or_default().trim().to_string();
        let uids: Vec<u32> = field("Uid:").split_whitespace().filter_map(|u| u.parse().ok()).collect();
        if uids.iter().any(|&u| is_sandbox_uid(who, u)) {
            let state = field("State:");
            let cmdline = fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let environ = fs::read(entry.path().join("environ")).unwrap_or_default();
            let environ = String::from_utf8_lossy(&environ);
            if !cmdline.contains(&ours) && !environ.contains(&workspace_marker) {
                continue;
            }
            found.push(Leftover {
                pid,
                ppid: field("PPid:").parse().unwrap_or(0),
                zombie: state.starts_with('Z'),
                description: format!("{} [{state}] uids {uids:?} cmdline {cmdline:?}", field("Name:")),
            });
        }
    }
    found
}

/// Assert that no sandbox process started by `who` remains (allowing 1.5 s for the
/// kill to land and for reaping). Call it while holding [`exclusive`].
///
/// Zombies keep neither command line nor environment, so they cannot be attributed and
/// are not counted: dead processes reparented to PID 1 are init's to reap (on this VM's
/// init that can take seconds).
#[track_caller]
pub fn assert_no_sandbox_processes(who: Who, context: &Output) {
    let deadline = Instant::now() + Duration::from_millis(1500);
    loop {
        let live: Vec<Leftover> = sandbox_processes(who, context.pid).into_iter().filter(|p| !p.zombie).collect();
        if live.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            panic!("{} sandbox process(es) left after the CLI exited: {live:#?}{context}", live.len());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------------------
// JSON helpers.
// ---------------------------------------------------------------------------------------

/// `json[key]` as a string, panicking with the whole output when absent.
#[track_caller]
pub fn str_at<'a>(json: &'a Value, pointer: &str, out: &Output) -> &'a str {
    json.pointer(pointer).and_then(Value::as_str).unwrap_or_else(|| panic!("no string at {pointer}:{out}"))
}

/// Assert the evaluation's outcome and the CLI's exit status together.
#[track_caller]
pub fn assert_outcome(out: &Output, json: &Value, outcome: &str, code: i32) {
    assert_eq!(json["outcome"], outcome, "unexpected outcome:{out}");
    out.assert_code(code);
}

/// Give each path its mode (say, 0o755 directories and 0o644 files, so that a sandbox
/// of another uid may read them).
#[allow(dead_code)] // not every test binary uses it
pub fn set_modes(paths: &[(&std::path::Path, u32)]) {
    use std::os::unix::fs::PermissionsExt;
    for (path, mode) in paths {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(*mode)).unwrap();
    }
}

/// A fresh directory `who` owns (removed first if it exists).
pub fn owned_dir(who: Who, name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rsandbox-cli-test-{name}-{who:?}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir(&dir).unwrap();
    if who == Who::User {
        let account = test_user();
        std::os::unix::fs::chown(&dir, Some(account.uid), Some(account.gid)).unwrap();
    }
    dir
}
