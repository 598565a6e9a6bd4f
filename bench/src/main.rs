//! rsandbox benchmark harness: rsandbox against its peers (plain Rscript, bwrap +
//! Rscript, callr, parallel::mcparallel, unshare), always interleaved (A B A B ...).
//!
//! Usage: `scripts/build-release.sh && target/release/rsandbox-bench [--quick] [--out DIR]`
//! (see bench/README.md). Writes `DIR/latest.md` and `DIR/latest.json`
//! (default DIR: `bench/results` of this source tree).
//!
//! Modules: `cli` (options), `measure` (timing, peers, R workers, interleaving),
//! `scenarios` (the library's scenarios), `fronts` (the same through `rsandbox serve
//! --stdio` and the `rsandbox` command), `network` (a download through the egress proxy
//! against a direct one), `report` (results and targets).

mod cli;
mod fronts;
mod measure;
mod network;
mod report;
mod scenarios;

use clap::Parser;
use measure::{r_has, sh, works};
use report::{targets, write_results, Report};
use scenarios::{Peers, BWRAP_R};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Copy the zygote and CLI to a private directory so that a rebuild of the workspace
/// during the run (another build writing target/release) cannot swap binaries
/// between scenarios. Returns the copies.
fn snapshot(zygote: &Path, cli: &Path) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("rsandbox-bench-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("snapshot directory");
    let copy = |p: &Path, name: &str| {
        let to = dir.join(name);
        std::fs::copy(p, &to).unwrap_or_else(|e| panic!("copy {}: {e}", p.display()));
        to
    };
    // `rsandbox serve` and the daemon run in `rsandbox-server`, which the CLI finds beside itself.
    copy(&server_beside(cli), "rsandbox-server");
    (copy(zygote, "rsandbox-zygote"), copy(cli, "rsandbox"))
}

/// The server binary built beside `cli`.
fn server_beside(cli: &Path) -> PathBuf {
    cli.with_file_name("rsandbox-server")
}

fn describe_binary(p: &Path) -> Value {
    let m = std::fs::metadata(p).ok();
    let mtime = m
        .as_ref()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs());
    json!({"size": m.map(|m| m.len()), "built_unix": mtime})
}

fn locate_binaries() -> (PathBuf, PathBuf) {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().unwrap().to_path_buf();
    let tree = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release");
    let find =
        |name: &str| [dir.join(name), dir.join("..").join(name), tree.join(name)].into_iter().find(|p| p.is_file());
    let zygote = std::env::var_os("RSANDBOX_ZYGOTE").map(PathBuf::from).or_else(|| find("rsandbox-zygote"));
    let cli = find("rsandbox").filter(|cli| server_beside(cli).is_file());
    match (zygote, cli) {
        (Some(z), Some(c)) => (z, c),
        _ => {
            eprintln!("rsandbox-bench: target/release/rsandbox-zygote, target/release/rsandbox and target/release/rsandbox-server must exist: run scripts/build-release.sh (the whole workspace, and the command built against musl) first");
            std::process::exit(1);
        }
    }
}

/// The newest of the sources cargo built `binary` from (its dep-info file, `<binary>.d`
/// beside it, lists them), and its modification time; `None` without that file.
fn newest_source(binary: &Path) -> Option<(std::time::SystemTime, PathBuf)> {
    let mut info = binary.as_os_str().to_owned();
    info.push(".d");
    let info = std::fs::read_to_string(info).ok()?;
    // `target: source source …`, spaces in paths escaped as `\ `.
    let (_, sources) = info.lines().next()?.split_once(": ")?;
    let sources = sources.replace("\\ ", "\0");
    sources
        .split_whitespace()
        .map(|source| PathBuf::from(source.replace('\0', " ")))
        .filter_map(|source| Some((std::fs::metadata(&source).ok()?.modified().ok()?, source)))
        .max()
}

/// Refuse binaries older than their sources: `cargo run -p rsandbox-bench` rebuilds the
/// bench, not the CLI or the zygote, so a run after an edit would measure the old code.
fn refuse_stale(binaries: &[&Path]) {
    for binary in binaries {
        let (Some((newest, source)), Ok(built)) =
            (newest_source(binary), std::fs::metadata(binary).and_then(|m| m.modified()))
        else {
            continue;
        };
        if built < newest {
            eprintln!(
                "rsandbox-bench: {} is older than {}: run scripts/build-release.sh (the whole workspace, and the command built against musl) first",
                binary.display(),
                source.display()
            );
            std::process::exit(1);
        }
    }
}

fn main() {
    let args = cli::Args::parse();
    let (zygote_found, cli_found) = locate_binaries();
    refuse_stale(&[&zygote_found, &cli_found, &server_beside(&cli_found)]);
    if args.probe {
        // SAFETY: no other thread exists yet.
        unsafe { std::env::set_var("RSANDBOX_ZYGOTE", &zygote_found) };
        scenarios::probe();
        return;
    }
    let cfg = args.cfg();
    let t0 = Instant::now();
    let (zygote, cli) = locate_binaries();
    // Which C library the command was built against (scripts/build-release.sh): its
    // process start is P6's floor.
    let cli_version = std::process::Command::new(&cli)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let originals = json!({
        "zygote": describe_binary(&zygote),
        "cli": describe_binary(&cli),
        "server": describe_binary(&server_beside(&cli)),
        "bench": describe_binary(&std::env::current_exe().unwrap()),
    });
    let (zygote, cli) = snapshot(&zygote, &cli);
    // SAFETY: single-threaded here, so nothing reads the environment meanwhile.
    unsafe { std::env::set_var("RSANDBOX_ZYGOTE", &zygote) };
    println!(
        "rsandbox-bench ({}): zygote {}, cli {}",
        if cfg.quick { "quick" } else { "full" },
        zygote.display(),
        cli.display()
    );
    println!("R worker stderr goes to {}", cfg.log.display());

    println!("Checking peers...");
    let peers = Peers {
        rscript: works(&["Rscript", "--vanilla", "-e", "1+1"]),
        bwrap: works(&[&BWRAP_R[..], &["-e", "1+1"]].concat())
            .and_then(|_| works(&["bwrap", "--unshare-all", "--ro-bind", "/", "/", "/bin/true"]))
            .map_err(|e| format!("bubblewrap unusable (install: bench/install-peers.sh): {e}")),
        callr: r_has("callr"),
        matrix: r_has("Matrix"),
        data_table: r_has("data.table"),
        unshare: works(&["unshare", "-Urnpf", "--mount-proc", "/bin/true"]),
        test_host: network::test_host_ready(),
    };
    for (name, p) in [
        ("Rscript", &peers.rscript),
        ("bwrap", &peers.bwrap),
        ("callr", &peers.callr),
        ("Matrix", &peers.matrix),
        ("data.table", &peers.data_table),
        ("unshare", &peers.unshare),
        ("HTTPS test host", &peers.test_host),
    ] {
        match p {
            Ok(()) => println!("  {name}: ok"),
            Err(e) => println!("  {name}: MISSING, its rows will be SKIPPED: {e}"),
        }
    }

    let engine = scenarios::start_engine(&[]);
    let info = engine.info();
    let mut report = Report::default();
    if cfg.runs("P1") {
        let pool = scenarios::start_pool(&engine, 2);
        scenarios::p1(&cfg, &mut report, &peers, &engine, &pool, "P1");
    }
    if cfg.runs("P2") {
        scenarios::p2(&cfg, &mut report, &peers, &engine, "P2");
    }
    if cfg.runs("M") {
        scenarios::meter(&cfg, &mut report, &engine);
    }
    if cfg.runs("P3") {
        scenarios::p3(&cfg, &mut report, &peers, &engine);
    }
    if cfg.runs("P4") {
        scenarios::p4(&cfg, &mut report, &peers);
    }
    if cfg.runs("I") {
        scenarios::idle_sessions(&cfg, &mut report);
    }
    if cfg.runs("P5") {
        scenarios::p5(&cfg, &mut report, &peers);
    }
    if cfg.runs("P6") {
        scenarios::p6(&cfg, &mut report, &peers, &cli);
    }
    let quiet_lockdown = if cfg.runs("S1") { fronts::s1(&cfg, &mut report, &peers, &cli) } else { Vec::new() };
    if cfg.runs("S2") {
        fronts::s2(&cfg, &mut report, &cli);
    }
    let busy_lockdown = if cfg.runs("S3") { fronts::s3(&cfg, &mut report, &peers, &cli) } else { Vec::new() };
    let what = "child lockdown (namespaces through seccomp), as each sandbox measured it";
    if !quiet_lockdown.is_empty() {
        report.add(
            "L",
            &format!("{what}: children of S1"),
            "us",
            quiet_lockdown,
            true,
            "forked one at a time between requests",
        );
    }
    if !busy_lockdown.is_empty() {
        report.add(
            "L",
            &format!("{what}: children of S3"),
            "us",
            busy_lockdown,
            false,
            "forked while 2 cores evaluate flat out",
        );
    }
    if cfg.runs("C1") {
        let runtime_dir = std::env::temp_dir().join(format!("rsandbox-bench-run-{}", std::process::id()));
        std::fs::create_dir_all(&runtime_dir).expect("a runtime dir");
        std::fs::set_permissions(&runtime_dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .expect("chmod the runtime dir");
        fronts::c1(&cfg, &mut report, &peers, &cli, &runtime_dir);
        std::fs::remove_dir_all(&runtime_dir).ok();
    }
    if cfg.runs("G") {
        scenarios::growth(&cfg, &mut report, &peers);
    }
    if cfg.runs(network::SCENARIO) {
        network::download(&cfg, &mut report, &peers);
    }
    targets(&mut report);
    report.notes.push("P1 Pool::eval waits (untimed) before each sample until the pool's 2 children are forked, so it measures a request that finds a pre-forked child; P3 measures the sustained rate including forking.".into());
    report.notes.push("P2 tool round trip = median(echo(1)) - median(identity(1)), both on the same session with the echo tool registered.".into());
    report.notes.push("P4: after one execute of 1+1 per session, the memory the k sessions added, per session: the PSS of the zygote and every process under it (sandbox children and anything they run) less the zygote's PSS measured just before with no session. The children's PSS alone (second row, the figure before this definition) holds a share of every page they still share with the zygote (half at k = 1), pages the zygote holds with no session at all. callr counts the r_session R processes, not the controlling R.".into());
    report.notes.push("P3: the pool has one child per core; client threads beyond that queue for a slot. Rscript processes are started concurrently by the same number of threads.".into());
    report.notes.push("S1 waits 15 ms (untimed) before each request so that the server has forked that request's sandbox: it measures a request that finds a waiting sandbox (the peer's run lies between two requests); the row \"15 ms after the previous answer\" has a server of its own and two requests per round, timing the second, which arrives while the first one's replacement sandbox is being made; the row \"serve --http POST /v1/eval\" is the same request through the HTTP front (its own server, one kept-alive connection, a minimal HTTP/1.1 client in the bench); S3 measures the sustained rate, forking included.".into());
    report.notes.push("W: a virtual machine's idle core loses its caches (the host runs other work on it, or puts it in a deep sleep), so a request after 15 ms of idleness, as in S1 and C1, costs several times the same request back to back: S2's \"15 ms after the previous answer\" row is S2's execute of 1+1 after that wait (in rounds of its own, after S2's other rows: one idle slows the next several requests, so beside them it would raise the back-to-back rows), and W times a memory walk (3 000 random reads in 8 MiB) straight after the previous one and after 15 ms asleep, without rsandbox.".into());
    report.notes.push("C1: the first (untimed) call starts the per-user daemon; `rsandbox eval (daemon)` then measures the command's process start, the socket round trip and a pre-forked evaluation; \"eval on its socket\" is the daemon's own answer, the same stdio protocol line sent on one connection to its socket by the bench, 15 ms (untimed) before each request as in S1.".into());
    if cfg.runs(network::SCENARIO) {
        report.notes.push(network::note(&cfg));
    }

    let date = sh("date -u '+%Y-%m-%d %H:%M:%S UTC'");
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let mut peer_status = BTreeMap::new();
    for (name, p) in [
        ("rscript", &peers.rscript),
        ("bwrap", &peers.bwrap),
        ("callr", &peers.callr),
        ("matrix", &peers.matrix),
        ("data.table", &peers.data_table),
        ("unshare", &peers.unshare),
        ("test_host", &peers.test_host),
    ] {
        peer_status.insert(name, p.as_ref().err().cloned().unwrap_or_else(|| "ok".into()));
    }
    let meta = json!({
        "date": date,
        "kernel": sh("uname -r"),
        "r_version": info.r_version,
        "cli_version": cli_version,
        "cpu": cpu,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "mode": if cfg.quick { "quick" } else { "full" },
        "command": format!(
            "scripts/build-release.sh && cargo run --release -p rsandbox-bench{}{}",
            if cfg.quick || !cfg.only.is_empty() { " --" } else { "" },
            [if cfg.quick { " --quick".to_string() } else { String::new() }, if cfg.only.is_empty() { String::new() } else { format!(" --only {}", cfg.only.join(",")) }].concat()
        ),
        "duration_s": (t0.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        "samples_per_latency_system": cfg.n,
        "peers": peer_status,
        "binaries": originals,
    });
    let doc = write_results(&cfg, &report, &meta);
    if let Some(dir) = zygote.parent() {
        std::fs::remove_dir_all(dir).ok();
    }
    if let Some(old) = &args.compare {
        match report::compare(&doc, old) {
            Ok(true) => println!("no ratio is more than 50% worse than in {}", old.display()),
            Ok(false) => {
                eprintln!("rsandbox-bench: a ratio is more than 50% worse than in {}", old.display());
                std::process::exit(1);
            }
            Err(e) => {
                eprintln!("rsandbox-bench: --compare: {e}");
                std::process::exit(2);
            }
        }
    }
}
