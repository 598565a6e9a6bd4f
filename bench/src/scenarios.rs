//! The scenarios of the library: P1 fresh evaluation, P2 sessions and tools, P3
//! throughput, P4 memory per session, P5 preloaded packages, P6 `exec`, and growth with
//! heavy preloads; `probe` says where a one-shot evaluation's time goes.

use crate::cli::Cfg;
use crate::measure::*;
use crate::report::{stats, Report};
use rsandbox::{Engine, EngineConfig, EvalOptions, ExecuteOptions, Pool, Session, Tool, ToolSpec};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub fn eval_opts() -> EvalOptions {
    EvalOptions::default()
}

pub fn start_engine(preload: &[&str]) -> Engine {
    let config = EngineConfig { preload: preload.iter().map(|s| s.to_string()).collect(), ..EngineConfig::default() };
    match Engine::start(config) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("rsandbox-bench: the engine did not start (preload {preload:?}): {e}\n  Run `target/release/rsandbox check` to see what this kernel lacks.");
            std::process::exit(1);
        }
    }
}

pub fn start_pool(engine: &Engine, size: usize) -> Pool {
    Pool::new(engine.clone(), size, eval_opts(), Duration::from_secs(120)).unwrap_or_else(|e| {
        eprintln!("rsandbox-bench: the pool did not start: {e}");
        std::process::exit(1);
    })
}

/// Wait (untimed) until the pool has all its children forked and idle.
pub fn wait_pool_full(pool: &Pool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while pool.status().idle < pool.status().size && Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(200));
    }
}

pub fn echo_tool() -> Tool {
    let spec: ToolSpec =
        serde_json::from_value(json!({"name": "echo", "description": "returns x", "args": {"x": "any"}})).unwrap();
    Tool::new(spec, |args| Ok(args.get("x").cloned().unwrap_or(Value::Null))).unwrap()
}

pub struct Peers {
    pub rscript: Result<(), String>,
    pub bwrap: Result<(), String>,
    pub callr: Result<(), String>,
    pub matrix: Result<(), String>,
    pub data_table: Result<(), String>,
    pub unshare: Result<(), String>,
    /// Root, `ip`, `openssl`, `python3`, `unshare`, `nsenter`: the HTTPS test host of scenario N.
    pub test_host: Result<(), String>,
}

/// bwrap around Rscript. `--tmpfs /tmp` is needed: Rscript writes `-e` code to a temp file.
pub const BWRAP_R: [&str; 14] = [
    "bwrap",
    "--unshare-all",
    "--die-with-parent",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
    "Rscript",
    "--vanilla",
];

pub fn p1(cfg: &Cfg, report: &mut Report, peers: &Peers, engine: &Engine, pool: &Pool, scenario: &str) {
    println!("{scenario}: fresh isolated evaluation of 1+1");
    let opts = eval_opts();
    check_ok("Engine::eval(1+1)", &engine.eval("1+1", &opts).unwrap());
    let mut runners = vec![
        runner("rsandbox Engine::eval", true, || {
            let t = Instant::now();
            let r = engine.eval("1+1", &opts).unwrap();
            let el = ms(t.elapsed());
            check_ok("Engine::eval", &r);
            vec![el]
        }),
        runner("rsandbox Pool::eval (pre-forked)", false, || {
            wait_pool_full(pool);
            let t = Instant::now();
            let r = pool.eval("1+1", None).unwrap();
            let el = ms(t.elapsed());
            check_ok("Pool::eval", &r);
            vec![el]
        }),
    ];
    if !scenario.starts_with("P1") {
        interleave(report, scenario, "ms", cfg.n, runners);
        return;
    }
    match &peers.rscript {
        Ok(()) => {
            runners.push(runner("Rscript --vanilla", false, || vec![time_cmd(&["Rscript", "--vanilla", "-e", "1+1"])]))
        }
        Err(e) => report.skip(scenario, "Rscript --vanilla", e),
    }
    match &peers.bwrap {
        Ok(()) => runners.push(runner("bwrap --unshare-all (+tmpfs /tmp) Rscript", false, || {
            let mut argv = BWRAP_R.to_vec();
            argv.extend(["-e", "1+1"]);
            vec![time_cmd(&argv)]
        })),
        Err(e) => report.skip(scenario, "bwrap --unshare-all (+tmpfs /tmp) Rscript", e),
    }
    let workers: Vec<(&str, Result<RWorker, String>)> = ["callr", "mcparallel"]
        .into_iter()
        .map(|mode| {
            let w = match (&peers.callr, mode) {
                (Err(e), "callr") => Err(e.clone()),
                _ => RWorker::start(cfg, mode),
            };
            (mode, w)
        })
        .collect();
    for (mode, w) in workers {
        let name = if mode == "callr" { "callr::r (timed in warm R)" } else { "parallel::mcparallel+mccollect (in R)" };
        match w {
            Ok(mut w) => runners.push(runner(name, false, move || w.batch(1))),
            Err(e) => report.skip(scenario, name, &e),
        }
    }
    interleave(report, scenario, "ms", cfg.n, runners);
}

pub fn p2(cfg: &Cfg, report: &mut Report, peers: &Peers, engine: &Engine, scenario: &str) {
    println!("{scenario}: warm session execute of 1+1, tool round trip");
    let plain = engine.session(eval_opts(), vec![]).expect("session");
    let tooled = engine.session(eval_opts(), vec![echo_tool()]).expect("session with tool");
    let xo = ExecuteOptions::default();
    check_ok("Session::execute(1+1)", &plain.execute("1+1", &xo).unwrap());
    let r = tooled.execute("echo(1)", &xo).unwrap();
    check_ok("Session::execute(echo(1))", &r);
    if r.value != json!(1) && r.value != json!([1]) {
        println!("  note: echo(1) returned {} (expected 1)", r.value);
    }
    let time_exec = |s: &Session, code: &str| {
        let t = Instant::now();
        let r = s.execute(code, &xo).unwrap();
        let el = ms(t.elapsed());
        check_ok("Session::execute", &r);
        vec![el]
    };
    let mut runners = vec![
        runner("rsandbox Session::execute", true, || time_exec(&plain, "1+1")),
        runner("rsandbox Session::execute echo(1) (tool)", false, || time_exec(&tooled, "echo(1)")),
        runner("rsandbox Session::execute identity(1) (tool session, no call)", false, || {
            time_exec(&tooled, "identity(1)")
        }),
    ];
    if scenario.starts_with("P2") {
        let w = peers.callr.clone().and_then(|_| RWorker::start(cfg, "r_session"));
        match w {
            Ok(mut w) => runners.push(runner("callr::r_session $run (in R)", false, move || w.batch(1))),
            Err(e) => report.skip(scenario, "callr::r_session $run (in R)", &e),
        }
    }
    interleave(report, scenario, "ms", cfg.n.max(20) + cfg.n / 2, runners);
}

/// What sandbox-wide accounting costs: a session execute that forks a worker living
/// 120 ms (longer than two sampling intervals: the supervisor sees R's child, meters the
/// group every 50 ms and cleans up after the request) against the same in plain R; and
/// a fork shorter than one interval (found at the request's end, from the CPU R reaped:
/// the group read once) and an execute that does not fork, for scale.
pub fn meter(cfg: &Cfg, report: &mut Report, engine: &Engine) {
    println!("M: the meter's cost: a session execute that forks a worker");
    const FORK: &str = "parallel::mccollect(parallel::mcparallel({ Sys.sleep(0.12); 1 + 1 }))[[1]]";
    const QUICK_FORK: &str = "parallel::mccollect(parallel::mcparallel(1 + 1))[[1]]";
    let session = engine.session(eval_opts(), vec![]).expect("session");
    let xo = ExecuteOptions::default();
    let r = session.execute(FORK, &xo).unwrap();
    check_ok("Session::execute(mcparallel)", &r);
    assert!(r.usage.sandbox_cpu_ms.is_some(), "a worker living 120 ms must start the meter: {:?}", r.usage);
    let time_exec = |code: &str| {
        let t = Instant::now();
        let r = session.execute(code, &xo).unwrap();
        let el = ms(t.elapsed());
        check_ok("Session::execute", &r);
        vec![el]
    };
    let mut runners = vec![
        runner("rsandbox Session::execute mcparallel(120 ms)+mccollect (metered)", true, || time_exec(FORK)),
        runner(
            "rsandbox Session::execute mcparallel(1+1)+mccollect (shorter than an interval: read once at the end)",
            false,
            || time_exec(QUICK_FORK),
        ),
        runner("rsandbox Session::execute 1+1 (no fork: nothing metered)", false, || time_exec("1+1")),
    ];
    match RWorker::start(cfg, "mcparallel_120ms") {
        Ok(mut w) => {
            runners.push(runner("parallel::mcparallel(120 ms)+mccollect (in plain R)", false, move || w.batch(1)))
        }
        Err(e) => report.skip("M", "parallel::mcparallel(120 ms)+mccollect (in plain R)", &e),
    }
    interleave(report, "M", "ms", cfg.n.max(20), runners);
}

pub fn p3(cfg: &Cfg, report: &mut Report, peers: &Peers, engine: &Engine) {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    println!("P3: throughput, Pool of {cores} (all cores) vs concurrent Rscript, {:.1} s per measurement", cfg.p3_secs);
    let pool = start_pool(engine, cores);
    let secs = cfg.p3_secs;
    let run_for = |c: usize, f: &(dyn Fn() + Sync)| -> f64 {
        let done = AtomicU64::new(0);
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..c {
                s.spawn(|| {
                    while t.elapsed().as_secs_f64() < secs {
                        f();
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        done.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64()
    };
    for c in [1usize, 2, 8, 32] {
        let scenario = format!("P3 c={c}");
        let mut runners = vec![runner(&format!("rsandbox Pool({cores})::eval"), true, || {
            vec![run_for(c, &|| check_ok("Pool::eval", &pool.eval("1+1", None).unwrap()))]
        })];
        match &peers.rscript {
            Ok(()) => runners.push(runner("Rscript --vanilla processes", false, || {
                vec![run_for(c, &|| {
                    time_cmd(&["Rscript", "--vanilla", "-e", "1+1"]);
                })]
            })),
            Err(e) => report.skip(&scenario, "Rscript --vanilla processes", e),
        }
        // The warm-up batch inside interleave is a full measurement; keep it short.
        interleave(report, &scenario, "evals/s", cfg.rounds, runners);
    }
}

pub fn p4(cfg: &Cfg, report: &mut Report, peers: &Peers) {
    println!("P4: memory per idle session (PSS)");
    // A dedicated engine so the zygote's only children are these sessions.
    let engine = start_engine(&[]);
    let zpid = engine.info().pid;
    let script_path = script("memory", R_MEMORY);
    for &k in &cfg.p4_counts {
        let scenario = format!("P4 k={k}");
        let mut ours = vec![];
        let mut children_only = vec![];
        let mut theirs = vec![];
        let mut zygote_pss = vec![];
        for _ in 0..cfg.rounds.min(2) {
            // rsandbox: what the zygote holds with no session, then with k.
            let zygote_alone = pss_kb(zpid);
            let sessions: Vec<Session> =
                (0..k).map(|_| engine.session(eval_opts(), vec![]).expect("session")).collect();
            for s in &sessions {
                check_ok("session 1+1", &s.execute("1+1", &ExecuteOptions::default()).unwrap());
            }
            std::thread::sleep(Duration::from_millis(300));
            let pids = descendants(zpid);
            let total: u64 = pids.iter().map(|&p| pss_kb(p)).sum();
            if pids.len() < k {
                println!("  note: found {} processes under the zygote for {k} sessions", pids.len());
            }
            let zygote = pss_kb(zpid);
            // What the k sessions added: a page a child shares with the zygote is split
            // between them in PSS, so the children's PSS alone holds a share of the
            // zygote's pages, which are there with no session at all (half of them at k = 1).
            ours.push((zygote + total).saturating_sub(zygote_alone) as f64 / 1024.0 / k as f64);
            children_only.push(total as f64 / 1024.0 / k as f64);
            zygote_pss.push(zygote as f64 / 1024.0);
            drop(sessions);
            let deadline = Instant::now() + Duration::from_secs(10);
            while !children(zpid).is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            // callr
            if peers.callr.is_ok() {
                let mut child = Command::new("Rscript")
                    .arg("--vanilla")
                    .arg(&script_path)
                    .arg(k.to_string())
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(log_file(cfg))
                    .spawn()
                    .expect("Rscript");
                let mut out = BufReader::new(child.stdout.take().unwrap());
                let mut pids = vec![];
                loop {
                    let mut line = String::new();
                    if out.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    if line.trim() == "END" {
                        break;
                    }
                    if let Ok(p) = line.trim().parse::<u32>() {
                        pids.push(p);
                    }
                }
                if pids.len() == k {
                    std::thread::sleep(Duration::from_millis(300));
                    let mut all = pids.clone();
                    for &p in &pids {
                        all.extend(descendants(p));
                    }
                    let total: u64 = all.iter().map(|&p| pss_kb(p)).sum();
                    theirs.push(total as f64 / 1024.0 / k as f64);
                } else {
                    println!(
                        "  note: callr memory script gave {} pids for {k} sessions (see {})",
                        pids.len(),
                        cfg.log.display()
                    );
                }
                let mut stdin = child.stdin.take().unwrap();
                writeln!(stdin, "done").ok();
                drop(stdin);
                child.wait().ok();
            }
            eprintln!("  {scenario}: round done");
        }
        let zp = stats(&zygote_pss).map(|s| s.median).unwrap_or(0.0);
        report.add(
            &scenario,
            "rsandbox Session: PSS added per session",
            "MB/session",
            ours,
            true,
            "(PSS of the zygote and every process under it) - (the zygote's PSS with no session), / k",
        );
        report.add(
            &scenario,
            "rsandbox Session: children's PSS alone",
            "MB/session",
            children_only,
            false,
            format!("holds a share of the zygote's pages (1/2 at k = 1); zygote PSS {zp:.1} MB with the sessions"),
        );
        match &peers.callr {
            Ok(()) => report.add(
                &scenario,
                "callr::r_session (R processes)",
                "MB/session",
                theirs,
                false,
                "controlling R not included",
            ),
            Err(e) => report.skip(&scenario, "callr::r_session", e),
        }
    }
}

/// The memory budget scenario I sizes: a 24 GB machine.
pub const IDLE_BUDGET_KB: u64 = 24 * 1000 * 1000 * 1000 / 1024;

/// I: `cfg.idle_sessions` idle sessions open at once through the library (each has
/// evaluated `1+1`): the sandboxes' total PSS (every process under the zygote), the
/// zygote's PSS, the supervisor's RSS (this process: the library is the supervisor),
/// and from those how many idle sessions 24 GB holds. A session's cost is its sandbox's
/// PSS plus what it adds to the supervisor's RSS; the zygote and the supervisor's RSS
/// before the first session are paid once.
pub fn idle_sessions(cfg: &Cfg, report: &mut Report) {
    let k = cfg.idle_sessions;
    println!("I: {k} idle sessions at once");
    let options = eval_opts();
    let config = EngineConfig {
        // Only these sessions under the zygote: no pre-forked children.
        prefork: 0,
        // Every idle session reserves its (empty) workspace quota; the default cap, half
        // the machine's memory, would refuse sessions long before memory runs out.
        max_total_disk: Some(options.disk.unwrap_or(0).saturating_mul(k as u64).max(1 << 30)),
        ..EngineConfig::default()
    };
    let engine = Engine::start(config).unwrap_or_else(|e| panic!("engine for scenario I: {e}"));
    let zpid = engine.info().pid;
    let me = std::process::id();
    let supervisor_before_kb = rss_kb(me);
    let t = Instant::now();
    let mut sessions: Vec<Session> = Vec::with_capacity(k);
    for i in 0..k {
        match engine.session(options.clone(), vec![]) {
            Ok(session) => sessions.push(session),
            Err(e) => {
                println!("  session {} of {k} refused: {e}", i + 1);
                break;
            }
        }
    }
    for session in &sessions {
        check_ok("session 1+1", &session.execute("1+1", &ExecuteOptions::default()).unwrap());
    }
    let open_s = t.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(500));
    let pids = descendants(zpid);
    let sandboxes_kb: u64 = pids.iter().map(|&p| pss_kb(p)).sum();
    // Page tables are memory of each process that PSS does not count.
    let page_tables_kb: u64 =
        pids.iter().map(|&p| kb_field(&PathBuf::from(format!("/proc/{p}/status")), "VmPTE:").unwrap_or(0)).sum();
    let zygote_kb = pss_kb(zpid);
    let supervisor_kb = rss_kb(me);
    let n = sessions.len().max(1) as u64;
    let per_session_kb = (sandboxes_kb + page_tables_kb) / n + supervisor_kb.saturating_sub(supervisor_before_kb) / n;
    let fixed_kb = zygote_kb + supervisor_before_kb;
    let fits = IDLE_BUDGET_KB.saturating_sub(fixed_kb) / per_session_kb.max(1);
    let mb = |kb: u64| kb as f64 / 1024.0;
    println!(
        "  {} sessions open in {open_s:.1} s, {} processes under the zygote: sandboxes' PSS {:.0} MB ({:.2} MB each, \
         page tables {:.2} MB more), zygote PSS {:.1} MB, supervisor RSS {:.1} MB (was {:.1} MB before the sessions); \
         24 GB holds {fits} idle sessions",
        sessions.len(),
        pids.len(),
        mb(sandboxes_kb),
        mb(sandboxes_kb) / n as f64,
        mb(page_tables_kb) / n as f64,
        mb(zygote_kb),
        mb(supervisor_kb),
        mb(supervisor_before_kb),
    );
    let scenario = format!("I k={}", sessions.len());
    let note = format!("zygote PSS {:.1} MB; {} processes under the zygote", mb(zygote_kb), pids.len());
    // One row per scenario id: the figures are of different kinds, none a ratio of another.
    let row = |what: &str| format!("{scenario} {what}");
    report.add(
        &row("total"),
        "rsandbox idle sessions: sandboxes' PSS, total",
        "MB",
        vec![mb(sandboxes_kb)],
        true,
        note,
    );
    report.add(
        &row("each"),
        "rsandbox idle sessions: sandbox PSS per session",
        "MB/session",
        vec![mb(sandboxes_kb) / n as f64],
        true,
        format!("page tables (VmPTE, not in PSS) {:.2} MB more", mb(page_tables_kb) / n as f64),
    );
    report.add(
        &row("supervisor"),
        "rsandbox idle sessions: supervisor RSS",
        "MB",
        vec![mb(supervisor_kb)],
        true,
        format!(
            "{:.1} MB before the sessions (the library in this process is the supervisor)",
            mb(supervisor_before_kb)
        ),
    );
    report.add(
        &row("in 24 GB"),
        "rsandbox idle sessions that 24 GB holds",
        "sessions",
        vec![fits as f64],
        true,
        "(24 GB - zygote PSS - supervisor RSS before) / (sandbox PSS + page tables + supervisor RSS growth) per session",
    );
    drop(sessions);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !children(zpid).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn p5(cfg: &Cfg, report: &mut Report, peers: &Peers) {
    let scenario = "P5";
    println!("P5: first evaluation using Matrix");
    if let Err(e) = &peers.matrix {
        report.skip(scenario, "all systems", e);
        return;
    }
    let t = Instant::now();
    let engine = start_engine(&["Matrix"]);
    let start_ms = ms(t.elapsed());
    let plain_engine = start_engine(&[]);
    let opts = eval_opts();
    let code = "m <- Matrix::Matrix(1:4, 2); dim(m)";
    check_ok("Matrix eval (preloaded)", &engine.eval(code, &opts).unwrap());
    check_ok("Matrix eval (not preloaded)", &plain_engine.eval(code, &opts).unwrap());
    let timed = |e: &Engine| {
        let t = Instant::now();
        let r = e.eval(code, &opts).unwrap();
        let el = ms(t.elapsed());
        check_ok("Matrix eval", &r);
        vec![el]
    };
    let mut runners = vec![
        runner("rsandbox Engine::eval, preload=Matrix", true, || timed(&engine)),
        runner("rsandbox Engine::eval, no preload", false, || timed(&plain_engine)),
    ];
    match &peers.rscript {
        Ok(()) => runners.push(runner("Rscript -e 'library(Matrix); Matrix(1:4,2)'", false, || {
            vec![time_cmd(&["Rscript", "--vanilla", "-e", "library(Matrix); Matrix(1:4,2)"])]
        })),
        Err(e) => report.skip(scenario, "Rscript", e),
    }
    interleave(report, scenario, "ms", (cfg.n * 3 / 4).max(5), runners);
    if let Some(r) = report.rows.iter_mut().find(|r| r.scenario == scenario && r.baseline) {
        r.note = format!("one-off zygote start with Matrix: {start_ms:.0} ms");
    }
}

pub fn p6(cfg: &Cfg, report: &mut Report, peers: &Peers, cli: &Path) {
    let scenario = "P6";
    println!("P6: sandbox cost of exec /bin/true");
    let cli = cli.to_str().unwrap().to_string();
    let mut runners = vec![];
    match works(&[&cli, "exec", "--", "/bin/true"]) {
        Ok(()) => runners
            .push(runner("rsandbox exec -- /bin/true", true, || vec![time_cmd(&[&cli, "exec", "--", "/bin/true"])])),
        Err(e) => report.skip(scenario, "rsandbox exec -- /bin/true", &e),
    }
    runners.push(runner("/bin/true", false, || vec![time_cmd(&["/bin/true"])]));
    // The floor under every `rsandbox` command: its own process start (dynamic loading,
    // relocation, argument parsing, exit) with no sandbox, so that the row above reads as
    // this plus the sandbox's cost.
    let mut start =
        runner("rsandbox --version (the CLI's process start)", false, || vec![time_cmd(&[&cli, "--version"])]);
    start.note = "no sandbox: what every rsandbox command costs before it does anything".into();
    runners.push(start);
    match &peers.unshare {
        Ok(()) => runners.push(runner("unshare -Urnpf --mount-proc /bin/true", false, || {
            vec![time_cmd(&["unshare", "-Urnpf", "--mount-proc", "/bin/true"])]
        })),
        Err(e) => report.skip(scenario, "unshare -Urnpf --mount-proc", e),
    }
    match &peers.bwrap {
        Ok(()) => runners.push(runner("bwrap --unshare-all --ro-bind / / /bin/true", false, || {
            vec![time_cmd(&["bwrap", "--unshare-all", "--ro-bind", "/", "/", "/bin/true"])]
        })),
        Err(e) => report.skip(scenario, "bwrap /bin/true", e),
    }
    interleave(report, scenario, "ms", cfg.n + cfg.n / 2, runners);
}

pub fn growth(cfg: &Cfg, report: &mut Report, peers: &Peers) {
    println!("Growth: P1/P2 with heavier preloads");
    let mut sets: Vec<Vec<&str>> = vec![vec![]];
    match &peers.matrix {
        Ok(()) => sets.push(vec!["Matrix"]),
        Err(e) => report.skip("G", "preload=Matrix", e),
    }
    match (&peers.matrix, &peers.data_table) {
        (Ok(()), Ok(())) => sets.push(vec!["Matrix", "data.table"]),
        (_, Err(e)) => report.skip("G", "preload=Matrix,data.table", e),
        (Err(_), _) => {}
    }
    let engines: Vec<(String, Engine, Pool)> = sets
        .iter()
        .map(|s| {
            let name = if s.is_empty() { "none".to_string() } else { s.join(",") };
            let e = start_engine(s);
            let p = start_pool(&e, 2);
            (name, e, p)
        })
        .collect();
    let opts = eval_opts();
    let xo = ExecuteOptions::default();
    let sessions: Vec<Session> =
        engines.iter().map(|(_, e, _)| e.session(eval_opts(), vec![]).expect("session")).collect();
    for s in &sessions {
        check_ok("growth session", &s.execute("1+1", &xo).unwrap());
    }
    let rss: Vec<(f64, f64)> = engines
        .iter()
        .map(|(_, e, _)| (rss_kb(e.info().pid) as f64 / 1024.0, pss_kb(e.info().pid) as f64 / 1024.0))
        .collect();
    for (what, scenario) in
        [("eval", "G-P1 Engine::eval"), ("pool", "G-P1 Pool::eval"), ("session", "G-P2 Session::execute")]
    {
        let mut runners = vec![];
        for (i, (name, e, p)) in engines.iter().enumerate() {
            let s = &sessions[i];
            let (opts, xo) = (&opts, &xo);
            let mut r = runner(&format!("rsandbox preload={name}"), i == 0, move || {
                let t = Instant::now();
                let r = match what {
                    "eval" => e.eval("1+1", opts).unwrap(),
                    "pool" => {
                        wait_pool_full(p);
                        let t2 = Instant::now();
                        let r = p.eval("1+1", None).unwrap();
                        check_ok("growth pool", &r);
                        return vec![ms(t2.elapsed())];
                    }
                    _ => s.execute("1+1", xo).unwrap(),
                };
                let el = ms(t.elapsed());
                check_ok("growth", &r);
                vec![el]
            });
            r.note = format!("zygote RSS {:.0} MB, PSS {:.0} MB", rss[i].0, rss[i].1);
            runners.push(r);
        }
        interleave(report, scenario, "ms", (cfg.n * 3 / 4).max(5), runners);
    }
}

/// `--probe`: where a one-shot evaluation's time and an idle session's memory go.
pub fn probe() {
    let engine = start_engine(&[]);
    let zpid = engine.info().pid;
    let xo = ExecuteOptions::default();
    // RSANDBOX_PROBE_FIRST / RSANDBOX_PROBE_SECOND: code for the first and second execute.
    let first = std::env::var("RSANDBOX_PROBE_FIRST").unwrap_or_else(|_| "1+1".into());
    let second = std::env::var("RSANDBOX_PROBE_SECOND").unwrap_or_else(|_| "1+1".into());
    for _ in 0..5 {
        let t = Instant::now();
        let s = engine.session(eval_opts(), vec![]).unwrap();
        let t_start = ms(t.elapsed());
        let t = Instant::now();
        let r1 = s.execute(&first, &xo).unwrap();
        let t_first = ms(t.elapsed());
        let t = Instant::now();
        let r2 = s.execute(&second, &xo).unwrap();
        let t_second = ms(t.elapsed());
        if std::env::var_os("RSANDBOX_PROBE_FIRST").is_some() {
            println!("  first: {} {} | second: {} {}", r1.value, r1.stderr.trim(), r2.value, r2.stderr.trim());
        }
        let pids = descendants(zpid);
        let detail: Vec<String> = pids
            .iter()
            .map(|p| {
                let f = PathBuf::from(format!("/proc/{p}/smaps_rollup"));
                format!(
                    "pid {p}: Rss {} Pss {} Private_Dirty {} AnonHuge {} kB",
                    kb_field(&f, "Rss:").unwrap_or(0),
                    kb_field(&f, "Pss:").unwrap_or(0),
                    kb_field(&f, "Private_Dirty:").unwrap_or(0),
                    kb_field(&f, "AnonHugePages:").unwrap_or(0)
                )
            })
            .collect();
        let t = Instant::now();
        drop(s);
        let t_drop = ms(t.elapsed());
        println!(
            "session start (fork+lockdown) {t_start:.2} ms | first execute {t_first:.2} ms (child-reported wall {} ms, cpu {} ms) | second execute {t_second:.2} ms | drop {t_drop:.2} ms | {}",
            r1.usage.wall_ms,
            r1.usage.cpu_ms,
            detail.join("; ")
        );
    }
    let s = engine.session(eval_opts(), vec![]).unwrap();
    let times: Vec<String> = (0..12)
        .map(|_| {
            let t = Instant::now();
            s.execute("1+1", &xo).unwrap();
            format!("{:.1}", ms(t.elapsed()))
        })
        .collect();
    println!("12 consecutive executes of 1+1 on one fresh session (ms): {}", times.join(" "));
    drop(s);
    let f = PathBuf::from(format!("/proc/{zpid}/smaps_rollup"));
    println!(
        "zygote: Rss {} Pss {} AnonHuge {} kB",
        kb_field(&f, "Rss:").unwrap_or(0),
        kb_field(&f, "Pss:").unwrap_or(0),
        kb_field(&f, "AnonHugePages:").unwrap_or(0)
    );
}
