//! The per-user daemon that `rsandbox eval`/`run` reuse: started by the first call,
//! reused by later ones (the same zygote answers), as locked down as a one-shot call,
//! stopped on request or when idle, and never used through a directory others can
//! enter. As root and as the unprivileged `rsandbox-test`.

#[macro_use]
mod common;

use common::*;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A fresh `XDG_RUNTIME_DIR` owned by `who`.
fn runtime_base(who: Who, name: &str) -> PathBuf {
    let base = std::env::temp_dir().join(format!("rsandbox-daemon-test-{name}-{who:?}-{}", std::process::id()));
    std::fs::remove_dir_all(&base).ok();
    std::fs::create_dir(&base).unwrap();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700)).unwrap();
    if who == Who::User {
        let account = test_user();
        std::os::unix::fs::chown(&base, Some(account.uid), Some(account.gid)).unwrap();
    }
    base
}

fn eval_via(who: Who, base: &Path, idle: &str, extra: &[&str], code: &str) -> (Output, Value) {
    let mut args = vec!["eval", "--json"];
    args.extend_from_slice(extra);
    args.push(code);
    let env =
        [("RSANDBOX_NO_DAEMON", "0"), ("XDG_RUNTIME_DIR", base.to_str().unwrap()), ("RSANDBOX_DAEMON_IDLE", idle)];
    let out = rsandbox_with(who, &args, &env, None);
    let json = out.json();
    (out, json)
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn files_with(dir: &Path, extension: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == extension))
                .collect()
        })
        .unwrap_or_default()
}

/// R code whose value names the engine that served it: workspaces live in a directory
/// named `rsandbox-<supervisor pid>-<random>`.
const WHO_SERVES: &str = "basename(dirname(getwd()))";

/// The supervisor pid in a [`WHO_SERVES`] value.
fn supervisor_of(result: &Value) -> i64 {
    let name = result["value"].as_str().unwrap_or_else(|| panic!("no workspace name in {result}"));
    name.split('-').nth(1).and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("unexpected workspace root {name}"))
}

both!(
    fn started_reused_and_stopped(who) {
        let base = runtime_base(who, "reuse");
        let dir = base.join("rsandbox");
        // The first call evaluates on its own and starts the daemon for the next ones.
        let (out, first) = eval_via(who, &base, "60", &[], WHO_SERVES);
        assert_outcome(&out, &first, "ok", 0);
        wait_for("the daemon's socket", || !files_with(&dir, "sock").is_empty() && !files_with(&dir, "pid").is_empty());
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "the socket directory is private");
        let daemon: i64 = std::fs::read_to_string(&files_with(&dir, "pid")[0]).unwrap().trim().parse().unwrap();

        // Later calls are answered by the daemon.
        let (out2, second) = eval_via(who, &base, "60", &[], WHO_SERVES);
        assert_outcome(&out2, &second, "ok", 0);
        let (out3, third) = eval_via(who, &base, "60", &[], WHO_SERVES);
        assert_outcome(&out3, &third, "ok", 0);
        assert_eq!(supervisor_of(&second), daemon, "served by the daemon:{out2}");
        assert_eq!(supervisor_of(&third), daemon, "served by the daemon:{out3}");
        assert_eq!(supervisor_of(&first), out.pid as i64, "the first call served itself:{out}");
        let zygotes: Vec<i64> = std::fs::read_to_string(format!("/proc/{daemon}/task/{daemon}/children"))
            .unwrap()
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(zygotes.len(), 1, "the daemon runs one zygote: {zygotes:?}");
        let zygote = zygotes[0];
        // As locked down as a one-shot evaluation.
        let (alone_out, alone) = eval_via(who, &base, "60", &["--no-daemon"], WHO_SERVES);
        assert_outcome(&alone_out, &alone, "ok", 0);
        assert_eq!(supervisor_of(&alone), alone_out.pid as i64, "--no-daemon serves itself:{alone_out}");
        for layer in ["namespaces", "private_root", "landlock", "seccomp", "workspace_quota"] {
            assert_eq!(second["layers"][layer], alone["layers"][layer], "layer {layer}:{out2}{alone_out}");
        }
        // Inputs, outputs and script arguments travel too.
        let script = base.join("job.R");
        std::fs::write(&script, "cat(readLines('in.txt'), commandArgs(TRUE), basename(dirname(getwd())))").unwrap();
        std::fs::write(base.join("in.txt"), "from host").unwrap();
        let out_dir = base.join("out");
        let env = [("RSANDBOX_NO_DAEMON", "0"), ("XDG_RUNTIME_DIR", base.to_str().unwrap())];
        let job = rsandbox_with(who, &["run", "--input", base.join("in.txt").to_str().unwrap(), "--output",
            out_dir.to_str().unwrap(), script.to_str().unwrap(), "--", "arg1"], &env, None);
        job.assert_code(0);
        assert!(job.stdout.starts_with(&format!("from host arg1 rsandbox-{daemon}-")), "served by the daemon:{job}");
        assert_eq!(std::fs::read_to_string(out_dir.join("in.txt")).unwrap(), "from host");
        // Limits and errors travel too.
        let (t_out, timeout) = eval_via(who, &base, "60", &["--timeout", "0.5"], "Sys.sleep(5)");
        assert_outcome(&t_out, &timeout, "timeout", 3);
        let bad = rsandbox_with(
            who,
            &["eval", ""],
            &[("RSANDBOX_NO_DAEMON", "0"), ("XDG_RUNTIME_DIR", base.to_str().unwrap())],
            None,
        );
        bad.assert_code(2);

        // Stopped on request: the daemon, its zygote and its socket go.
        let stop = rsandbox_with(who, &["daemon", "--stop"], &[("XDG_RUNTIME_DIR", base.to_str().unwrap())], None);
        stop.assert_code(0);
        wait_for("the daemon to exit", || !Path::new(&format!("/proc/{daemon}")).exists());
        wait_for("its zygote to exit", || !Path::new(&format!("/proc/{zygote}")).exists());
        assert!(files_with(&dir, "sock").is_empty(), "socket removed");
        std::fs::remove_dir_all(&base).unwrap();
    }
);

/// Processes of `rsandbox daemon` serving the daemon named `name` (its lock's stem).
fn daemons_named(name: &str) -> Vec<u32> {
    let flag = format!("--name\0{name}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(&flag))
        })
        .collect()
}

both!(
    /// `eval` then `daemon --stop` at once: the first call answers by itself and starts
    /// the daemon for later ones, which is still starting when the stop comes; the stop
    /// waits for it and ends it, instead of stopping nothing and leaving it to idle out.
    fn a_daemon_still_starting_is_stopped_too(who) {
        let base = runtime_base(who, "starting");
        let dir = base.join("rsandbox");
        let (out, j) = eval_via(who, &base, "60", &[], "1 + 1");
        assert_outcome(&out, &j, "ok", 0);
        let stop = rsandbox_with(who, &["daemon", "--stop"], &[("XDG_RUNTIME_DIR", base.to_str().unwrap())], None);
        stop.assert_code(0);
        assert!(stop.stderr.contains("stopped 1 daemon(s)"), "{stop}");
        let locks = files_with(&dir, "lock");
        assert_eq!(locks.len(), 1, "one daemon was started: {locks:?}");
        let name = locks[0].file_stem().unwrap().to_str().unwrap().to_string();
        wait_for("the daemon to exit", || daemons_named(&name).is_empty());
        assert!(files_with(&dir, "sock").is_empty(), "socket removed");
        std::fs::remove_dir_all(&base).unwrap();
    }
);

both!(
    fn an_idle_daemon_exits_by_itself(who) {
        let base = runtime_base(who, "idle");
        let dir = base.join("rsandbox");
        let (out, j) = eval_via(who, &base, "1", &[], "1 + 1");
        assert_outcome(&out, &j, "ok", 0);
        wait_for("the daemon's pid file", || !files_with(&dir, "pid").is_empty());
        let daemon: i64 = std::fs::read_to_string(&files_with(&dir, "pid")[0]).unwrap().trim().parse().unwrap();
        wait_for("the idle daemon to exit", || !Path::new(&format!("/proc/{daemon}")).exists());
        assert!(files_with(&dir, "sock").is_empty(), "socket removed");
        std::fs::remove_dir_all(&base).unwrap();
    }
);

both!(
    fn a_directory_others_can_enter_is_not_used(who) {
        let base = runtime_base(who, "open");
        let dir = base.join("rsandbox");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        if who == Who::User {
            let account = test_user();
            std::os::unix::fs::chown(&dir, Some(account.uid), Some(account.gid)).unwrap();
        }
        let (out, j) = eval_via(who, &base, "60", &[], "1 + 1");
        assert_outcome(&out, &j, "ok", 0);
        assert!(out.stderr.contains("evaluating without the daemon") && out.stderr.contains("open to other users"), "{out}");
        std::thread::sleep(Duration::from_millis(300));
        assert!(files_with(&dir, "sock").is_empty() && files_with(&dir, "pid").is_empty(), "no daemon started");
        std::fs::remove_dir_all(&base).unwrap();
    }
);

/// Allocates 1 MiB vectors until one fails and prints how many MiB it got.
const MEMORY_PROBE: &str = "l <- list(); n <- 0
repeat { ok <- tryCatch({ l[[n + 1]] <- numeric(131072); TRUE }, error = function(e) FALSE); if (!ok) break; n <- n + 1 }
n";

both!(
    fn a_pre_forked_sandbox_is_the_same_sandbox_as_a_one_shot_one(who) {
        let base = runtime_base(who, "same");
        // The first call starts the daemon; wait for it so that the next ones use it.
        let (out, _) = eval_via(who, &base, "60", &[], "1");
        out.assert_code(0);
        wait_for("the daemon's socket", || !files_with(&base.join("rsandbox"), "sock").is_empty());
        let dlls = "paste(names(getLoadedDLLs()), collapse = ' ')";
        let (d_out, daemon) = eval_via(who, &base, "60", &[], dlls);
        let (a_out, alone) = eval_via(who, &base, "60", &["--no-daemon"], dlls);
        assert_outcome(&d_out, &daemon, "ok", 0);
        assert_outcome(&a_out, &alone, "ok", 0);
        assert_eq!(daemon["value"], alone["value"], "the same shared objects loaded:{d_out}{a_out}");
        // The memory limit gives the same figure on both paths, within 5% or 8 MiB of
        // the limit (pre-forked children used to get ~64 MiB more: glibc's per-thread
        // malloc arenas left reserved in the zygote).
        for limit_mib in [100i64, 300] {
            let limit = format!("{limit_mib}M");
            let (d_out, daemon) = eval_via(who, &base, "60", &["--memory", &limit], MEMORY_PROBE);
            let (a_out, alone) = eval_via(who, &base, "60", &["--no-daemon", "--memory", &limit], MEMORY_PROBE);
            assert_outcome(&d_out, &daemon, "ok", 0);
            assert_outcome(&a_out, &alone, "ok", 0);
            let (got_daemon, got_alone) = (daemon["value"].as_i64().unwrap(), alone["value"].as_i64().unwrap());
            let slack = (limit_mib / 20).max(8);
            assert!((got_daemon - got_alone).abs() <= 8, "{limit}: {got_daemon} MiB pre-forked, {got_alone} one-shot");
            for got in [got_daemon, got_alone] {
                assert!((got - limit_mib).abs() <= slack, "{limit}: got {got} MiB");
            }
        }
        // A limit smaller than one allocation stops it, through the daemon too.
        let (t_out, tiny) = eval_via(who, &base, "60", &["--memory", "1K"], "x <- numeric(5e6); 1");
        assert_outcome(&t_out, &tiny, "memory_limit", 5);
        let stop = rsandbox_with(who, &["daemon", "--stop"], &[("XDG_RUNTIME_DIR", base.to_str().unwrap())], None);
        stop.assert_code(0);
        std::fs::remove_dir_all(&base).ok();
    }
);

both!(
    /// What a daemon that died leaves (a socket nobody listens on, a pid file) must not
    /// make `--stop` signal whatever process now has that pid.
    fn stop_signals_no_process_named_by_a_stale_pid_file(who) {
        let base = runtime_base(who, "stale");
        let dir = base.join("rsandbox");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let socket = dir.join("rsandbox-dead.sock");
        drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        let mut bystander = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        std::fs::write(dir.join("rsandbox-dead.pid"), bystander.id().to_string()).unwrap();
        if who == Who::User {
            let account = test_user();
            for path in [&dir, &socket, &dir.join("rsandbox-dead.pid")] {
                std::os::unix::fs::chown(path, Some(account.uid), Some(account.gid)).unwrap();
            }
        }
        let stop = rsandbox_with(who, &["daemon", "--stop"], &[("XDG_RUNTIME_DIR", base.to_str().unwrap())], None);
        stop.assert_code(0);
        assert!(stop.stderr.contains("stopped 0 daemon(s)"), "{stop}");
        assert!(bystander.try_wait().unwrap().is_none(), "the process named by the stale pid file was signalled");
        assert!(!socket.exists(), "the dead daemon's socket is cleaned up");
        bystander.kill().ok();
        bystander.wait().ok();
        std::fs::remove_dir_all(&base).ok();
    }
);

/// A container that shares the daemon directory with the host (or with another
/// container) has a pid namespace of its own, where the host's daemon is not visible:
/// `SO_PEERCRED` names it with pid 0. The CLI there must neither use that daemon (it
/// evaluates in the host's world) nor fail on the answer (it printed "evaluating without
/// the daemon: SO_PEERCRED: Success (os error 0)"); it gets a daemon of its own. Root:
/// a pid namespace is made with `unshare --pid --fork --mount-proc`.
#[test]
fn a_daemon_of_another_pid_namespace_is_not_used() {
    let base = runtime_base(Who::Root, "pidns");
    let dir = base.join("rsandbox");
    let (out, j) = eval_via(Who::Root, &base, "60", &[], "1 + 1");
    assert_outcome(&out, &j, "ok", 0);
    wait_for("the host's daemon", || !files_with(&dir, "sock").is_empty() && !files_with(&dir, "pid").is_empty());
    let host_daemon: i64 = std::fs::read_to_string(&files_with(&dir, "pid")[0]).unwrap().trim().parse().unwrap();
    let (out, j) = eval_via(Who::Root, &base, "60", &[], WHO_SERVES);
    assert_eq!(supervisor_of(&j), host_daemon, "the host's own calls use its daemon:{out}");

    let in_namespace = || {
        let out = std::process::Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc"])
            .arg(&binaries().cli)
            .args(["eval", "--json", WHO_SERVES])
            .env_clear()
            .envs([
                ("PATH", "/usr/local/bin:/usr/bin:/bin"),
                ("LANG", "C.UTF-8"),
                ("HOME", "/root"),
                ("RSANDBOX_NO_DAEMON", "0"),
                ("RSANDBOX_DAEMON_IDLE", "60"),
                ("XDG_RUNTIME_DIR", base.to_str().unwrap()),
            ])
            .current_dir("/")
            .output()
            .expect("run unshare");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "in a pid namespace of its own: {:?}\n{stdout}\n{stderr}", out.status);
        let json: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
        (json, stderr.into_owned())
    };
    // Twice: the first call starts the namespace's daemon, the second may find it.
    for _ in 0..2 {
        let (j, stderr) = in_namespace();
        assert_eq!(j["outcome"], "ok", "{j}\n{stderr}");
        assert!(!stderr.contains("os error 0"), "{stderr}");
        assert!(!stderr.contains("evaluating without the daemon"), "the host's daemon is not this caller's: {stderr}");
        assert_ne!(supervisor_of(&j), host_daemon, "served by the host's daemon: {j}");
    }
    let stop = rsandbox_with(Who::Root, &["daemon", "--stop"], &[("XDG_RUNTIME_DIR", base.to_str().unwrap())], None);
    stop.assert_code(0);
    wait_for("the host's daemon to exit", || !Path::new(&format!("/proc/{host_daemon}")).exists());
    std::fs::remove_dir_all(&base).ok();
}

/// Out of descriptors, the daemon waits for one instead of ending (its accept loop ended
/// the daemon, and every client's sessions with it): a client that connects meanwhile is
/// served once a descriptor is free. Root: the daemon's limit is lowered from outside.
#[test]
fn out_of_descriptors_the_daemon_takes_the_next_client_later() {
    use rustix::process::{prlimit, Pid, Resource, Rlimit};
    use std::io::{BufRead, Write};
    let base = runtime_base(Who::Root, "descriptors");
    let dir = base.join("rsandbox");
    let (out, j) = eval_via(Who::Root, &base, "60", &[], "1 + 1");
    assert_outcome(&out, &j, "ok", 0);
    wait_for("the daemon", || !files_with(&dir, "sock").is_empty() && !files_with(&dir, "pid").is_empty());
    let daemon: i32 = std::fs::read_to_string(&files_with(&dir, "pid")[0]).unwrap().trim().parse().unwrap();
    // The socket is made before the pid file: the daemon accepts from here on.
    let pid = Pid::from_raw(daemon);
    // Below every descriptor it holds: none is free, whatever it opens meanwhile.
    let limits = std::fs::read_to_string(format!("/proc/{daemon}/limits")).unwrap();
    let hard = limits.lines().find(|l| l.starts_with("Max open files")).and_then(|l| l.split_whitespace().nth(4));
    let hard = hard.and_then(|h| h.parse().ok()).unwrap_or_else(|| panic!("no hard limit in {limits}"));
    let limit = prlimit(pid, Resource::Nofile, Rlimit { current: Some(3), maximum: Some(hard) }).unwrap();
    let mut client = std::os::unix::net::UnixStream::connect(&files_with(&dir, "sock")[0]).unwrap();
    client.write_all(b"{\"id\": 1, \"op\": \"eval\", \"code\": \"1 + 1\"}\n").unwrap();
    // Long enough for many tries at accepting.
    std::thread::sleep(Duration::from_millis(800));
    let alive = Path::new(&format!("/proc/{daemon}")).exists();
    prlimit(pid, Resource::Nofile, limit).ok();
    assert!(alive, "the daemon ended when it had no descriptor free");
    client.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut answer = String::new();
    std::io::BufReader::new(&client).read_line(&mut answer).unwrap();
    let answer: Value = serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer:?}"));
    assert_eq!(answer["result"]["value"], 2, "{answer}");
    let stop = rsandbox_with(Who::Root, &["daemon", "--stop"], &[("XDG_RUNTIME_DIR", base.to_str().unwrap())], None);
    stop.assert_code(0);
    std::fs::remove_dir_all(&base).ok();
}
