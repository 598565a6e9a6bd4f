//! Measuring: timing commands, checking peers, process memory, warm R workers that time
//! calls from inside R, and interleaving systems (A B C A B C ...) with a progress bar.

use crate::cli::Cfg;
use crate::report::Report;
use rsandbox::Outcome;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn time_cmd(argv: &[&str]) -> f64 {
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
pub fn works(argv: &[&str]) -> Result<(), String> {
    match Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
    {
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

pub fn r_has(pkg: &str) -> Result<(), String> {
    let code = format!("quit(status = if (requireNamespace('{pkg}', quietly = TRUE)) 0 else 1)");
    works(&["Rscript", "--vanilla", "-e", &code])
        .map_err(|_| format!("R package '{pkg}' is not installed (run bench/install-peers.sh)"))
}

pub fn sh(cmd: &str) -> String {
    Command::new("sh")
        .args(["-c", cmd])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

pub fn check_ok(what: &str, r: &rsandbox::EvalResult) {
    if r.outcome != Outcome::Ok {
        eprintln!("rsandbox-bench: {what}: outcome {:?}, error {:?}, stderr {:?}", r.outcome, r.error, r.stderr);
        std::process::exit(1);
    }
}

pub fn kb_field(path: &Path, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok())
}

pub fn pss_kb(pid: u32) -> u64 {
    kb_field(&PathBuf::from(format!("/proc/{pid}/smaps_rollup")), "Pss:").unwrap_or(0)
}

pub fn rss_kb(pid: u32) -> u64 {
    kb_field(&PathBuf::from(format!("/proc/{pid}/status")), "VmRSS:").unwrap_or(0)
}

pub fn children(pid: u32) -> Vec<u32> {
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

pub fn descendants(pid: u32) -> Vec<u32> {
    let mut all = vec![];
    let mut stack = children(pid);
    while let Some(p) = stack.pop() {
        all.push(p);
        stack.extend(children(p));
    }
    all
}

pub const R_WORKER: &str = r#"
mode <- commandArgs(TRUE)[1]
con <- file("stdin"); open(con)
now <- function() as.numeric(Sys.time())
if (mode == "callr") {
  loadNamespace("callr"); f <- function() callr::r(function() 1 + 1)
} else if (mode == "mcparallel") {
  loadNamespace("parallel"); f <- function() parallel::mccollect(parallel::mcparallel(1 + 1))[[1]]
} else if (mode == "mcparallel_120ms") {
  loadNamespace("parallel"); f <- function() parallel::mccollect(parallel::mcparallel({ Sys.sleep(0.12); 1 + 1 }))[[1]]
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

pub const R_MEMORY: &str = r#"
k <- as.integer(commandArgs(TRUE)[1])
ss <- lapply(seq_len(k), function(i) callr::r_session$new())
for (s in ss) stopifnot(identical(s$run(function() 1 + 1), 2))
cat(sapply(ss, function(s) s$get_pid()), sep = "\n"); cat("END\n"); flush(stdout())
invisible(readLines(file("stdin"), n = 1))
for (s in ss) s$close()
"#;

pub fn script(name: &str, text: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("rsandbox-bench-{}-{name}.R", std::process::id()));
    std::fs::write(&p, text).expect("write R script");
    p
}

pub fn log_file(cfg: &Cfg) -> Stdio {
    std::fs::OpenOptions::new().create(true).append(true).open(&cfg.log).map(Stdio::from).unwrap_or(Stdio::null())
}

/// A warm R process that times `f()` itself and reports per-call milliseconds.
pub struct RWorker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl RWorker {
    pub fn start(cfg: &Cfg, mode: &str) -> Result<RWorker, String> {
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

    pub fn batch(&mut self, n: usize) -> Vec<f64> {
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

/// One system under test: a closure giving one batch of samples per round.
pub struct Runner<'a> {
    system: String,
    baseline: bool,
    pub note: String,
    run: Box<dyn FnMut() -> Vec<f64> + 'a>,
    samples: Vec<f64>,
}

pub fn runner<'a>(system: &str, baseline: bool, run: impl FnMut() -> Vec<f64> + 'a) -> Runner<'a> {
    Runner { system: system.into(), baseline, note: String::new(), run: Box::new(run), samples: vec![] }
}

/// Run every runner once per round, after one untimed warm-up batch each, with a
/// progress bar on the terminal. Each round takes the runners in a new order, shuffled
/// (seeded, so a run can be repeated): a sample depends on what ran just before it (a
/// peer's R run leaves the caches cold for the next row, the row after gets them warm),
/// so every system must follow every other equally often. A rotation (A B C, B C A, ...)
/// did not do that: the row after a peer followed it in all rounds but one, and the P2
/// row after callr read 0.85 ms against 0.32 ms without callr in the scenario.
pub fn interleave(
    report: &mut Report,
    scenario: &str,
    unit: &'static str,
    rounds: usize,
    mut runners: Vec<Runner<'_>>,
) {
    for r in runners.iter_mut() {
        (r.run)();
    }
    let bar = indicatif::ProgressBar::new(rounds as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("  {prefix}: [{bar:30}] {pos}/{len} ({elapsed})")
            .expect("a valid template")
            .progress_chars("#>."),
    );
    bar.set_prefix(scenario.to_string());
    let count = runners.len();
    let mut order: Vec<usize> = (0..count).collect();
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    for _ in 0..rounds {
        rng.shuffle(&mut order);
        for &turn in &order {
            let r = &mut runners[turn];
            let s = (r.run)();
            r.samples.extend(s);
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    eprintln!("  {scenario}: {rounds} rounds in {:.1} s", bar.elapsed().as_secs_f64());
    for r in runners {
        report.add(scenario, &r.system, unit, r.samples, r.baseline, r.note);
    }
}
