//! rsandbox benchmark harness: rsandbox against its peers (plain Rscript, bwrap +
//! Rscript, callr, parallel::mcparallel, unshare), always interleaved (A B A B ...).
//!
//! Usage: `cargo build --release && target/release/rsandbox-bench [--quick] [--out DIR]`
//! (see bench/README.md). Writes `DIR/latest.md` and `DIR/latest.json`
//! (default DIR: `bench/results` of this source tree).

use rsandbox::{Engine, EngineConfig, EvalOptions, ExecuteOptions, Outcome, Pool, Session, Tool, ToolSpec};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------- configuration

struct Cfg {
    quick: bool,
    /// Samples per system in the latency scenarios.
    n: usize,
    /// Rounds of the throughput and memory scenarios.
    rounds: usize,
    /// Seconds per throughput measurement.
    p3_secs: f64,
    p4_counts: Vec<usize>,
    out: PathBuf,
    log: PathBuf,
}

fn parse_args() -> Cfg {
    let mut quick = false;
    let mut out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results");
    let mut n_override = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--probe" => {
                let (zygote, _) = locate_binaries();
                std::env::set_var("RSANDBOX_ZYGOTE", &zygote);
                probe();
                std::process::exit(0);
            }
            "--out" => out = PathBuf::from(args.next().expect("--out DIR")),
            "-n" => n_override = Some(args.next().expect("-n N").parse().expect("-n N")),
            "-h" | "--help" => {
                println!("rsandbox-bench [--quick] [--out DIR] [-n SAMPLES]\n  --quick  smoke run (< 1 minute)\n  --out    results directory (default bench/results)\n  -n       samples per system in latency scenarios (default 40; quick 5)");
                std::process::exit(0);
            }
            other => {
                eprintln!("rsandbox-bench: unknown argument {other:?} (try --help)");
                std::process::exit(2);
            }
        }
    }
    let log = std::env::temp_dir().join(format!("rsandbox-bench-{}.log", std::process::id()));
    Cfg {
        quick,
        n: n_override.unwrap_or(if quick { 5 } else { 40 }),
        rounds: if quick { 1 } else { 3 },
        p3_secs: if quick { 0.3 } else { 2.0 },
        p4_counts: if quick { vec![1, 5] } else { vec![1, 10, 50] },
        out,
        log,
    }
}

// ---------------------------------------------------------------- results

#[derive(Clone)]
struct Row {
    scenario: String,
    system: String,
    unit: &'static str,
    samples: Vec<f64>,
    /// Ratio is computed against this scenario's baseline row.
    baseline: bool,
    note: String,
    skipped: Option<String>,
}

struct Stats {
    n: usize,
    median: f64,
    p90: f64,
    max: f64,
}

fn stats(samples: &[f64]) -> Option<Stats> {
    if samples.is_empty() {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = s.len();
    let median = if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 };
    let rank = ((0.9 * n as f64).ceil() as usize).clamp(1, n);
    Some(Stats { n, median, p90: s[rank - 1], max: s[n - 1] })
}

#[derive(Default)]
struct Report {
    rows: Vec<Row>,
    targets: Vec<(String, String, String)>,
    notes: Vec<String>,
}

impl Report {
    fn add(&mut self, scenario: &str, system: &str, unit: &'static str, samples: Vec<f64>, baseline: bool, note: impl Into<String>) {
        self.rows.push(Row { scenario: scenario.into(), system: system.into(), unit, samples, baseline, note: note.into(), skipped: None });
    }
    fn skip(&mut self, scenario: &str, system: &str, why: &str) {
        println!("  SKIP {scenario} / {system}: {why}");
        self.rows.push(Row {
            scenario: scenario.into(),
            system: system.into(),
            unit: "",
            samples: vec![],
            baseline: false,
            note: String::new(),
            skipped: Some(why.into()),
        });
    }
    fn median_of(&self, scenario: &str, system: &str) -> Option<f64> {
        self.rows.iter().find(|r| r.scenario == scenario && r.system == system).and_then(|r| stats(&r.samples)).map(|s| s.median)
    }
    fn baseline_median(&self, scenario: &str) -> Option<f64> {
        self.rows.iter().find(|r| r.scenario == scenario && r.baseline).and_then(|r| stats(&r.samples)).map(|s| s.median)
    }
}

fn fmt_num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

// ---------------------------------------------------------------- helpers

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn time_cmd(argv: &[&str]) -> f64 {
    let t = Instant::now();
    let status = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("failed to run {argv:?}: {e}"));
    let el = ms(t.elapsed());
    assert!(status.success(), "{argv:?} failed: {status}");
    el
}

/// Whether a command runs successfully (used to check peers before timing them).
fn works(argv: &[&str]) -> Result<(), String> {
    match Command::new(argv[0]).args(&argv[1..]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "`{}` failed ({}): {}",
            argv.join(" "),
            o.status,
            String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("").trim()
        )),
        Err(e) => Err(format!("`{}` cannot run: {e}", argv[0])),
    }
}

fn r_has(pkg: &str) -> Result<(), String> {
    let code = format!("quit(status = if (requireNamespace('{pkg}', quietly = TRUE)) 0 else 1)");
    works(&["Rscript", "--vanilla", "-e", &code])
        .map_err(|_| format!("R package '{pkg}' is not installed (run bench/install-peers.sh)"))
}

fn sh(cmd: &str) -> String {
    Command::new("sh")
        .args(["-c", cmd])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn check_ok(what: &str, r: &rsandbox::EvalResult) {
    if r.outcome != Outcome::Ok {
        eprintln!("rsandbox-bench: {what}: outcome {:?}, error {:?}, stderr {:?}", r.outcome, r.error, r.stderr);
        std::process::exit(1);
    }
}

fn kb_field(path: &Path, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok())
}

fn pss_kb(pid: u32) -> u64 {
    kb_field(&PathBuf::from(format!("/proc/{pid}/smaps_rollup")), "Pss:").unwrap_or(0)
}

fn rss_kb(pid: u32) -> u64 {
    kb_field(&PathBuf::from(format!("/proc/{pid}/status")), "VmRSS:").unwrap_or(0)
}

fn children(pid: u32) -> Vec<u32> {
    let mut out = vec![];
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
            }
        }
    }
    out
}

fn descendants(pid: u32) -> Vec<u32> {
    let mut all = vec![];
    let mut stack = children(pid);
    while let Some(p) = stack.pop() {
        all.push(p);
        stack.extend(children(p));
    }
    all
}

// ---------------------------------------------------------------- in-R timing workers

const R_WORKER: &str = r#"
mode <- commandArgs(TRUE)[1]
con <- file("stdin"); open(con)
now <- function() as.numeric(Sys.time())
if (mode == "callr") {
  loadNamespace("callr"); f <- function() callr::r(function() 1 + 1)
} else if (mode == "mcparallel") {
  loadNamespace("parallel"); f <- function() parallel::mccollect(parallel::mcparallel(1 + 1))[[1]]
} else if (mode == "r_session") {
  rs <- callr::r_session$new(); f <- function() rs$run(function() 1 + 1)
} else stop("unknown mode ", mode)
stopifnot(identical(f(), 2))
cat("READY\n"); flush(stdout())
repeat {
  l <- readLines(con, n = 1)
  if (length(l) == 0 || l == "quit") break
  n <- as.integer(l); out <- numeric(n)
  for (i in seq_len(n)) { t0 <- now(); v <- f(); out[i] <- (now() - t0) * 1000 }
  cat(sprintf("%.6f", out), sep = "\n"); cat("END\n"); flush(stdout())
}
"#;

const R_MEMORY: &str = r#"
k <- as.integer(commandArgs(TRUE)[1])
ss <- lapply(seq_len(k), function(i) callr::r_session$new())
for (s in ss) stopifnot(identical(s$run(function() 1 + 1), 2))
cat(sapply(ss, function(s) s$get_pid()), sep = "\n"); cat("END\n"); flush(stdout())
invisible(readLines(file("stdin"), n = 1))
for (s in ss) s$close()
"#;

fn script(name: &str, text: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("rsandbox-bench-{}-{name}.R", std::process::id()));
    std::fs::write(&p, text).expect("write R script");
    p
}

fn log_file(cfg: &Cfg) -> Stdio {
    std::fs::OpenOptions::new().create(true).append(true).open(&cfg.log).map(Stdio::from).unwrap_or(Stdio::null())
}

/// A warm R process that times `f()` itself and reports per-call milliseconds.
struct RWorker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl RWorker {
    fn start(cfg: &Cfg, mode: &str) -> Result<RWorker, String> {
        let path = script("worker", R_WORKER);
        let mut child = Command::new("Rscript")
            .arg("--vanilla")
            .arg(&path)
            .arg(mode)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log_file(cfg))
            .spawn()
            .map_err(|e| format!("cannot start Rscript: {e}"))?;
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).map_err(|e| e.to_string())?;
        if line.trim() != "READY" {
            child.kill().ok();
            child.wait().ok();
            return Err(format!("R worker '{mode}' did not start (see {})", cfg.log.display()));
        }
        Ok(RWorker { child, stdin, stdout })
    }

    fn batch(&mut self, n: usize) -> Vec<f64> {
        writeln!(self.stdin, "{n}").expect("R worker stdin");
        self.stdin.flush().ok();
        let mut out = vec![];
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line).expect("R worker stdout") == 0 {
                panic!("R worker exited early");
            }
            let l = line.trim();
            if l == "END" {
                return out;
            }
            out.push(l.parse().expect("R worker number"));
        }
    }
}

impl Drop for RWorker {
    fn drop(&mut self) {
        writeln!(self.stdin, "quit").ok();
        self.stdin.flush().ok();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

// ---------------------------------------------------------------- interleaving

/// One system under test: a closure giving one batch of samples per round.
struct Runner<'a> {
    system: String,
    baseline: bool,
    note: String,
    run: Box<dyn FnMut() -> Vec<f64> + 'a>,
    samples: Vec<f64>,
}

fn runner<'a>(system: &str, baseline: bool, run: impl FnMut() -> Vec<f64> + 'a) -> Runner<'a> {
    Runner { system: system.into(), baseline, note: String::new(), run: Box::new(run), samples: vec![] }
}

/// Run every runner once per round, in turn (A B C A B C ...), after one untimed
/// warm-up batch each.
fn interleave(report: &mut Report, scenario: &str, unit: &'static str, rounds: usize, mut runners: Vec<Runner<'_>>) {
    for r in runners.iter_mut() {
        (r.run)();
    }
    let t = Instant::now();
    for i in 0..rounds {
        for r in runners.iter_mut() {
            let s = (r.run)();
            r.samples.extend(s);
        }
        let filled = (i + 1) * 30 / rounds.max(1);
        eprint!(
            "\r  {scenario}: [{}{}] {}/{rounds} ({:.0} s)   ",
            "#".repeat(filled),
            ".".repeat(30 - filled),
            i + 1,
            t.elapsed().as_secs_f64()
        );
    }
    eprintln!("\r  {scenario}: {rounds} rounds in {:.1} s          ", t.elapsed().as_secs_f64());
    for r in runners {
        report.add(scenario, &r.system, unit, r.samples, r.baseline, r.note);
    }
}

// ---------------------------------------------------------------- scenarios

fn eval_opts() -> EvalOptions {
    EvalOptions::default()
}

fn start_engine(preload: &[&str]) -> Engine {
    let config = EngineConfig { preload: preload.iter().map(|s| s.to_string()).collect(), ..EngineConfig::default() };
    match Engine::start(config) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("rsandbox-bench: the engine did not start (preload {preload:?}): {e}\n  Run `target/release/rsandbox check` to see what this kernel lacks.");
            std::process::exit(1);
        }
    }
}

fn start_pool(engine: &Engine, size: usize) -> Pool {
    Pool::new(engine.clone(), size, eval_opts(), Duration::from_secs(120)).unwrap_or_else(|e| {
        eprintln!("rsandbox-bench: the pool did not start: {e}");
        std::process::exit(1);
    })
}

/// Wait (untimed) until the pool has all its children forked and idle.
fn wait_pool_full(pool: &Pool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while pool.status().idle < pool.status().size && Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn echo_tool() -> Tool {
    let spec: ToolSpec = serde_json::from_value(json!({"name": "echo", "description": "returns x", "args": {"x": "any"}})).unwrap();
    Tool::new(spec, |args| Ok(args.get("x").cloned().unwrap_or(Value::Null))).unwrap()
}

struct Peers {
    rscript: Result<(), String>,
    bwrap: Result<(), String>,
    callr: Result<(), String>,
    matrix: Result<(), String>,
    data_table: Result<(), String>,
    unshare: Result<(), String>,
}

/// bwrap around Rscript. `--tmpfs /tmp` is needed: Rscript writes `-e` code to a temp file.
const BWRAP_R: [&str; 14] = [
    "bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
    "Rscript", "--vanilla",
];

fn p1(cfg: &Cfg, report: &mut Report, peers: &Peers, engine: &Engine, pool: &Pool, scenario: &str) {
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
        Ok(()) => runners.push(runner("Rscript --vanilla", false, || vec![time_cmd(&["Rscript", "--vanilla", "-e", "1+1"])])),
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

fn p2(cfg: &Cfg, report: &mut Report, peers: &Peers, engine: &Engine, scenario: &str) {
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
        runner("rsandbox Session::execute identity(1) (tool session, no call)", false, || time_exec(&tooled, "identity(1)")),
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

fn p3(cfg: &Cfg, report: &mut Report, peers: &Peers, engine: &Engine) {
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

fn p4(cfg: &Cfg, report: &mut Report, peers: &Peers) {
    println!("P4: PSS per idle session");
    // A dedicated engine so the zygote's only children are these sessions.
    let engine = start_engine(&[]);
    let zpid = engine.info().pid;
    let script_path = script("memory", R_MEMORY);
    for &k in &cfg.p4_counts {
        let scenario = format!("P4 k={k}");
        let mut ours = vec![];
        let mut theirs = vec![];
        let mut zygote_pss = vec![];
        for _ in 0..cfg.rounds.min(2) {
            // rsandbox
            let sessions: Vec<Session> = (0..k).map(|_| engine.session(eval_opts(), vec![]).expect("session")).collect();
            for s in &sessions {
                check_ok("session 1+1", &s.execute("1+1", &ExecuteOptions::default()).unwrap());
            }
            std::thread::sleep(Duration::from_millis(300));
            let pids = descendants(zpid);
            let total: u64 = pids.iter().map(|&p| pss_kb(p)).sum();
            if pids.len() < k {
                println!("  note: found {} processes under the zygote for {k} sessions", pids.len());
            }
            ours.push(total as f64 / 1024.0 / k as f64);
            zygote_pss.push(pss_kb(zpid) as f64 / 1024.0);
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
                    println!("  note: callr memory script gave {} pids for {k} sessions (see {})", pids.len(), cfg.log.display());
                }
                let mut stdin = child.stdin.take().unwrap();
                writeln!(stdin, "done").ok();
                drop(stdin);
                child.wait().ok();
            }
            eprintln!("  {scenario}: round done");
        }
        let zp = stats(&zygote_pss).map(|s| s.median).unwrap_or(0.0);
        report.add(&scenario, "rsandbox Session (children of zygote)", "MB/session", ours, true, format!("zygote PSS {zp:.1} MB not included"));
        match &peers.callr {
            Ok(()) => report.add(&scenario, "callr::r_session (R processes)", "MB/session", theirs, false, "controlling R not included"),
            Err(e) => report.skip(&scenario, "callr::r_session", e),
        }
    }
}

fn p5(cfg: &Cfg, report: &mut Report, peers: &Peers) {
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

fn p6(cfg: &Cfg, report: &mut Report, peers: &Peers, cli: &Path) {
    let scenario = "P6";
    println!("P6: sandbox cost of exec /bin/true");
    let cli = cli.to_str().unwrap().to_string();
    let mut runners = vec![];
    match works(&[&cli, "exec", "--", "/bin/true"]) {
        Ok(()) => runners.push(runner("rsandbox exec -- /bin/true", true, || vec![time_cmd(&[&cli, "exec", "--", "/bin/true"])])),
        Err(e) => report.skip(scenario, "rsandbox exec -- /bin/true", &e),
    }
    runners.push(runner("/bin/true", false, || vec![time_cmd(&["/bin/true"])]));
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

fn growth(cfg: &Cfg, report: &mut Report, peers: &Peers) {
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
    let sessions: Vec<Session> = engines.iter().map(|(_, e, _)| e.session(eval_opts(), vec![]).expect("session")).collect();
    for s in &sessions {
        check_ok("growth session", &s.execute("1+1", &xo).unwrap());
    }
    let rss: Vec<(f64, f64)> = engines.iter().map(|(_, e, _)| (rss_kb(e.info().pid) as f64 / 1024.0, pss_kb(e.info().pid) as f64 / 1024.0)).collect();
    for (what, scenario) in [("eval", "G-P1 Engine::eval"), ("pool", "G-P1 Pool::eval"), ("session", "G-P2 Session::execute")] {
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

// ---------------------------------------------------------------- output

fn write_results(cfg: &Cfg, report: &Report, meta: &Value) {
    std::fs::create_dir_all(&cfg.out).expect("results directory");
    let mut md = String::new();
    md.push_str("# rsandbox benchmark results\n\n");
    for (k, label) in [
        ("date", "Date"),
        ("kernel", "Kernel (`uname -r`)"),
        ("r_version", "R"),
        ("cpu", "CPU"),
        ("cores", "Cores"),
        ("mode", "Mode"),
        ("command", "Command"),
        ("duration_s", "Run time (s)"),
    ] {
        let v = &meta[k];
        let v = v.as_str().map(String::from).unwrap_or_else(|| v.to_string());
        md.push_str(&format!("- {label}: {v}\n"));
    }
    md.push_str("\nAll systems of a scenario ran interleaved (one sample of each in turn, after an untimed warm-up). ");
    md.push_str("`ratio` = this row's median / the median of the scenario's first rsandbox row (marked *). ");
    md.push_str("For evals/s higher is better; for everything else lower is better. ");
    md.push_str("callr / mcparallel / r_session times are measured inside one warm R process (`Sys.time()` around each call).\n\n");
    md.push_str("| scenario | system | n | unit | median | p90 | max | ratio vs rsandbox | note |\n");
    md.push_str("|---|---|---:|---|---:|---:|---:|---:|---|\n");
    let mut json_rows = vec![];
    for r in &report.rows {
        if let Some(why) = &r.skipped {
            md.push_str(&format!("| {} | {} | 0 | | | | | | SKIPPED: {} |\n", r.scenario, r.system, why));
            json_rows.push(json!({"scenario": r.scenario, "system": r.system, "skipped": why}));
            continue;
        }
        let Some(s) = stats(&r.samples) else { continue };
        let base = report.baseline_median(&r.scenario);
        let ratio = base.filter(|b| *b > 0.0).map(|b| s.median / b);
        let sys = if r.baseline { format!("{} *", r.system) } else { r.system.clone() };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.scenario,
            sys,
            s.n,
            r.unit,
            fmt_num(s.median),
            fmt_num(s.p90),
            fmt_num(s.max),
            ratio.map(|x| format!("{x:.2}")).unwrap_or_default(),
            r.note
        ));
        json_rows.push(json!({
            "scenario": r.scenario, "system": r.system, "unit": r.unit, "n": s.n,
            "median": s.median, "p90": s.p90, "max": s.max, "ratio_vs_rsandbox": ratio,
            "baseline": r.baseline, "note": r.note, "samples": r.samples,
        }));
    }
    md.push_str("\n## Targets (printed, not asserted)\n\n| target | measured | verdict |\n|---|---|---|\n");
    for (t, m, v) in &report.targets {
        md.push_str(&format!("| {t} | {m} | {v} |\n"));
    }
    if !report.notes.is_empty() {
        md.push_str("\n## Notes\n\n");
        for n in &report.notes {
            md.push_str(&format!("- {n}\n"));
        }
    }
    let targets: Vec<Value> = report.targets.iter().map(|(t, m, v)| json!({"target": t, "measured": m, "verdict": v})).collect();
    let doc = json!({"meta": meta, "rows": json_rows, "targets": targets, "notes": report.notes});
    std::fs::write(cfg.out.join("latest.md"), &md).expect("write latest.md");
    std::fs::write(cfg.out.join("latest.json"), serde_json::to_string_pretty(&doc).unwrap()).expect("write latest.json");
    println!("\n{md}");
    println!("wrote {} and {}", cfg.out.join("latest.md").display(), cfg.out.join("latest.json").display());
}

fn verdict(measured: f64, target: f64, lower_is_better: bool, unit: &str) -> String {
    let met = if lower_is_better { measured <= target } else { measured >= target };
    if met {
        "met".into()
    } else if lower_is_better {
        format!("MISSED by {} {unit} ({:.1}x the target)", fmt_num(measured - target), measured / target)
    } else {
        format!("MISSED by {} {unit} ({:.0}% of the target)", fmt_num(target - measured), 100.0 * measured / target)
    }
}

fn targets(report: &mut Report) {
    let mut t = vec![];
    if let Some(m) = report.median_of("P1", "rsandbox Pool::eval (pre-forked)") {
        t.push(("P1 p50 <= 1 ms with a pre-forked child (Pool::eval)".to_string(), format!("{} ms", fmt_num(m)), verdict(m, 1.0, true, "ms")));
    }
    if let (Some(tool), Some(plain)) = (
        report.median_of("P2", "rsandbox Session::execute echo(1) (tool)"),
        report.median_of("P2", "rsandbox Session::execute identity(1) (tool session, no call)"),
    ) {
        let d = tool - plain;
        t.push((
            "P2 tool round trip <= 0.3 ms over the evaluation itself".to_string(),
            format!("{} ms (median echo(1) {} - median identity(1) {})", fmt_num(d), fmt_num(tool), fmt_num(plain)),
            verdict(d, 0.3, true, "ms"),
        ));
    }
    if let Some(m) = report.median_of("P2", "rsandbox Session::execute") {
        t.push(("P2 warm session execute of 1+1 (context for the tool target)".to_string(), format!("{} ms", fmt_num(m)), "-".into()));
    }
    let best = [1, 2, 8, 32]
        .iter()
        .filter_map(|c| {
            let sc = format!("P3 c={c}");
            report.rows.iter().find(|r| r.scenario == sc && r.baseline).and_then(|r| stats(&r.samples)).map(|s| (*c, s.median))
        })
        .fold(None, |acc: Option<(usize, f64)>, x| if acc.is_none_or(|a| x.1 > a.1) { Some(x) } else { acc });
    if let Some((c, m)) = best {
        t.push(("P3 >= 400 evals/s on 2 cores (best concurrency)".to_string(), format!("{} evals/s at c={c}", fmt_num(m)), verdict(m, 400.0, false, "evals/s")));
    }
    for k in [1, 10, 50] {
        let sc = format!("P4 k={k}");
        if let Some(m) = report.baseline_median(&sc) {
            t.push((format!("P4 <= 5 MB PSS per idle session (k={k})"), format!("{} MB", fmt_num(m)), verdict(m, 5.0, true, "MB")));
        }
    }
    report.targets = t;
}

/// `--probe`: where a one-shot evaluation's time and an idle session's memory go.
fn probe() {
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
    println!("zygote: Rss {} Pss {} AnonHuge {} kB", kb_field(&f, "Rss:").unwrap_or(0), kb_field(&f, "Pss:").unwrap_or(0), kb_field(&f, "AnonHugePages:").unwrap_or(0));
}

// ---------------------------------------------------------------- main

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
    (copy(zygote, "rsandbox-zygote"), copy(cli, "rsandbox"))
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
    let find = |name: &str| [dir.join(name), dir.join("..").join(name), tree.join(name)].into_iter().find(|p| p.is_file());
    let zygote = std::env::var_os("RSANDBOX_ZYGOTE").map(PathBuf::from).or_else(|| find("rsandbox-zygote"));
    let cli = find("rsandbox");
    match (zygote, cli) {
        (Some(z), Some(c)) => (z, c),
        _ => {
            eprintln!("rsandbox-bench: target/release/rsandbox-zygote and target/release/rsandbox must exist: run `cargo build --release` (the whole workspace) first");
            std::process::exit(1);
        }
    }
}

fn main() {
    let cfg = parse_args();
    let t0 = Instant::now();
    let (zygote, cli) = locate_binaries();
    let originals = json!({
        "zygote": describe_binary(&zygote),
        "cli": describe_binary(&cli),
        "bench": describe_binary(&std::env::current_exe().unwrap()),
    });
    let (zygote, cli) = snapshot(&zygote, &cli);
    // Single-threaded here: setting the variable is sound.
    std::env::set_var("RSANDBOX_ZYGOTE", &zygote);
    println!("rsandbox-bench ({}): zygote {}, cli {}", if cfg.quick { "quick" } else { "full" }, zygote.display(), cli.display());
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
    };
    for (name, p) in [
        ("Rscript", &peers.rscript),
        ("bwrap", &peers.bwrap),
        ("callr", &peers.callr),
        ("Matrix", &peers.matrix),
        ("data.table", &peers.data_table),
        ("unshare", &peers.unshare),
    ] {
        match p {
            Ok(()) => println!("  {name}: ok"),
            Err(e) => println!("  {name}: MISSING, its rows will be SKIPPED: {e}"),
        }
    }

    let engine = start_engine(&[]);
    let info = engine.info();
    let mut report = Report::default();
    {
        let pool = start_pool(&engine, 2);
        p1(&cfg, &mut report, &peers, &engine, &pool, "P1");
    }
    p2(&cfg, &mut report, &peers, &engine, "P2");
    p3(&cfg, &mut report, &peers, &engine);
    p4(&cfg, &mut report, &peers);
    p5(&cfg, &mut report, &peers);
    p6(&cfg, &mut report, &peers, &cli);
    growth(&cfg, &mut report, &peers);
    targets(&mut report);
    report.notes.push("P1 Pool::eval waits (untimed) before each sample until the pool's 2 children are forked, so it measures a request that finds a pre-forked child; P3 measures the sustained rate including forking.".into());
    report.notes.push("P2 tool round trip = median(echo(1)) - median(identity(1)), both on the same session with the echo tool registered.".into());
    report.notes.push("P4 PSS is summed over every process under the zygote (sandbox children and anything they run) after one execute of 1+1 per session; the zygote's own PSS is not counted (shown in note). callr counts the r_session R processes, not the controlling R.".into());
    report.notes.push("P3: the pool has one child per core; client threads beyond that queue for a slot. Rscript processes are started concurrently by the same number of threads.".into());

    let date = sh("date -u '+%Y-%m-%d %H:%M:%S UTC'");
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| t.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_default();
    let mut peer_status = BTreeMap::new();
    for (name, p) in [("rscript", &peers.rscript), ("bwrap", &peers.bwrap), ("callr", &peers.callr), ("matrix", &peers.matrix), ("data.table", &peers.data_table), ("unshare", &peers.unshare)] {
        peer_status.insert(name, p.as_ref().err().cloned().unwrap_or_else(|| "ok".into()));
    }
    let meta = json!({
        "date": date,
        "kernel": sh("uname -r"),
        "r_version": info.r_version,
        "cpu": cpu,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "mode": if cfg.quick { "quick" } else { "full" },
        "command": format!("cargo build --release && cargo run --release -p rsandbox-bench{}", if cfg.quick { " -- --quick" } else { "" }),
        "duration_s": (t0.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        "samples_per_latency_system": cfg.n,
        "peers": peer_status,
        "binaries": originals,
    });
    write_results(&cfg, &report, &meta);
    if let Some(dir) = zygote.parent() {
        std::fs::remove_dir_all(dir).ok();
    }
}
