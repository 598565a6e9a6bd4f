//! Results: rows, statistics, the targets of issue 8, and the Markdown/JSON files.

use crate::cli::Cfg;
use serde_json::{json, Value};

#[derive(Clone)]
pub struct Row {
    pub scenario: String,
    pub system: String,
    pub unit: &'static str,
    pub samples: Vec<f64>,
    /// Ratio is computed against this scenario's baseline row.
    pub baseline: bool,
    pub note: String,
    pub skipped: Option<String>,
}

pub struct Stats {
    pub n: usize,
    pub median: f64,
    pub p90: f64,
    pub max: f64,
}

pub fn stats(samples: &[f64]) -> Option<Stats> {
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

/// One target of issue 26, as measured: the value, what it is held against (a fixed
/// goal, or a peer measured in the same run), and whether it is met.
pub struct Target {
    pub name: String,
    pub measured: f64,
    pub unit: &'static str,
    /// The value to meet (at most, or at least when `lower_is_better` is false).
    pub goal: f64,
    pub lower_is_better: bool,
    /// The peer the goal is derived from, and its median in this run.
    pub peer: Option<(String, f64)>,
    /// How the measured value was obtained (shown beside it).
    pub detail: String,
    /// Context only: printed, never met or missed.
    pub context: bool,
}

impl Target {
    fn new(name: impl Into<String>, measured: f64, unit: &'static str, goal: f64, lower_is_better: bool) -> Target {
        Target {
            name: name.into(),
            measured,
            unit,
            goal,
            lower_is_better,
            peer: None,
            detail: String::new(),
            context: false,
        }
    }
    /// A figure printed beside the targets, against `peer`'s `value`: never met or missed.
    fn figure(name: &str, measured: f64, unit: &'static str, peer: &str, value: f64) -> Target {
        // A rate (MB/s) is better higher, a time better lower, as in the ratios.
        let mut figure = Target::new(name, measured, unit, value, !unit.ends_with("/s")).against(peer, value);
        figure.context = true;
        figure
    }
    fn against(mut self, peer: &str, value: f64) -> Target {
        self.peer = Some((peer.into(), value));
        self
    }
    fn detail(mut self, detail: impl Into<String>) -> Target {
        self.detail = detail.into();
        self
    }
    fn met(&self) -> Option<bool> {
        let met = if self.lower_is_better { self.measured <= self.goal } else { self.measured >= self.goal };
        (!self.context).then_some(met)
    }
    fn verdict(&self) -> String {
        if self.context {
            "-".into()
        } else {
            verdict(self.measured, self.goal, self.lower_is_better, self.unit)
        }
    }
    /// Measured / peer (for a target held against a peer).
    fn ratio(&self) -> Option<f64> {
        self.peer.as_ref().filter(|(_, v)| *v > 0.0).map(|(_, v)| self.measured / v)
    }
    fn measured_text(&self) -> String {
        let mut text = format!("{} {}", fmt_num(self.measured), self.unit);
        if let (Some((peer, value)), Some(ratio)) = (&self.peer, self.ratio()) {
            text.push_str(&format!(" against {} {} ({ratio:.2} of {peer})", fmt_num(*value), self.unit));
        }
        if !self.detail.is_empty() {
            text.push_str(&format!(" ({})", self.detail));
        }
        text
    }
    fn to_json(&self) -> Value {
        json!({
            "target": self.name,
            "measured": self.measured,
            "unit": self.unit,
            "goal": self.goal,
            "lower_is_better": self.lower_is_better,
            "peer": self.peer.as_ref().map(|(system, value)| json!({"system": system, "median": value})),
            "ratio_to_peer": self.ratio(),
            "met": self.met(),
            "verdict": self.verdict(),
            "detail": self.detail,
        })
    }
}

#[derive(Default)]
pub struct Report {
    pub rows: Vec<Row>,
    pub targets: Vec<Target>,
    pub notes: Vec<String>,
}

impl Report {
    pub fn add(
        &mut self,
        scenario: &str,
        system: &str,
        unit: &'static str,
        samples: Vec<f64>,
        baseline: bool,
        note: impl Into<String>,
    ) {
        self.rows.push(Row {
            scenario: scenario.into(),
            system: system.into(),
            unit,
            samples,
            baseline,
            note: note.into(),
            skipped: None,
        });
    }
    pub fn skip(&mut self, scenario: &str, system: &str, why: &str) {
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
    pub fn median_of(&self, scenario: &str, system: &str) -> Option<f64> {
        self.rows
            .iter()
            .find(|r| r.scenario == scenario && r.system == system)
            .and_then(|r| stats(&r.samples))
            .map(|s| s.median)
    }
    pub fn baseline_median(&self, scenario: &str) -> Option<f64> {
        self.rows
            .iter()
            .find(|r| r.scenario == scenario && r.baseline)
            .and_then(|r| stats(&r.samples))
            .map(|s| s.median)
    }
}

pub fn fmt_num(v: f64) -> String {
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

/// Write the Markdown and JSON files; returns the JSON document.
pub fn write_results(cfg: &Cfg, report: &Report, meta: &Value) -> Value {
    std::fs::create_dir_all(&cfg.out).expect("results directory");
    let mut md = String::new();
    md.push_str("# rsandbox benchmark results\n\n");
    for (k, label) in [
        ("date", "Date"),
        ("kernel", "Kernel (`uname -r`)"),
        ("r_version", "R"),
        ("cli_version", "The command (`rsandbox --version`)"),
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
    md.push_str("\nAll systems of a scenario ran interleaved (one sample of each per round, in an order shuffled anew each round, after an untimed warm-up). ");
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
    for t in &report.targets {
        md.push_str(&format!("| {} | {} | {} |\n", t.name, t.measured_text(), t.verdict()));
    }
    if !report.notes.is_empty() {
        md.push_str("\n## Notes\n\n");
        for n in &report.notes {
            md.push_str(&format!("- {n}\n"));
        }
    }
    let targets: Vec<Value> = report.targets.iter().map(Target::to_json).collect();
    let ratios = ratios(&Value::Array(json_rows.clone()));
    let doc = json!({"meta": meta, "rows": json_rows, "ratios": ratios, "targets": targets, "notes": report.notes});
    let (md_path, json_path) =
        (cfg.out.join(format!("{}.md", cfg.results_stem())), cfg.out.join(format!("{}.json", cfg.results_stem())));
    std::fs::write(&md_path, &md).expect("write the results (md)");
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc).unwrap()).expect("write the results (json)");
    println!("\n{md}");
    println!("wrote {} and {}", md_path.display(), json_path.display());
    doc
}

/// The cost ratios of a results document's rows: for every peer row (a system that is
/// not rsandbox's) of a scenario with an rsandbox baseline, how many times the peer's
/// cost rsandbox's is: baseline median / peer median for times and memory, peer /
/// baseline for evals/s. Above 1 rsandbox costs more than the peer; a larger value is
/// worse. Keyed "scenario: rsandbox system / peer system". Older files without a
/// `ratios` object give the same from their rows.
pub fn ratios(rows: &Value) -> serde_json::Map<String, Value> {
    let rows = rows.as_array().cloned().unwrap_or_default();
    let mut out = serde_json::Map::new();
    for base in rows.iter().filter(|r| r["baseline"].as_bool() == Some(true)) {
        let (Some(scenario), Some(b)) = (base["scenario"].as_str(), base["median"].as_f64()) else { continue };
        for peer in rows.iter().filter(|r| r["scenario"].as_str() == Some(scenario)) {
            let system = peer["system"].as_str().unwrap_or_default();
            let Some(m) = peer["median"].as_f64() else { continue };
            // rsandbox's own rows (and a baseline with no peer, such as L's) are no peers.
            let own = system.starts_with("rsandbox") || peer["baseline"].as_bool() == Some(true);
            if own || m <= 0.0 || b <= 0.0 {
                continue;
            }
            let higher_is_better = peer["unit"].as_str().is_some_and(|u| u.ends_with("/s"));
            let cost = if higher_is_better { m / b } else { b / m };
            let key = format!("{scenario}: {} / {system}", base["system"].as_str().unwrap_or_default());
            out.insert(key, json!((cost * 1000.0).round() / 1000.0));
        }
    }
    out
}

/// Compare the ratios of `new` (this run's document) with those of the file `old`:
/// print each, and return false when one is more than 50% worse (new > 1.5 × old).
/// Ratios only one of them has, and ratios over 5 (a peer that is a floor), are listed,
/// not judged.
pub fn compare(new: &Value, old: &std::path::Path) -> Result<bool, String> {
    let text = std::fs::read_to_string(old).map_err(|e| format!("read {}: {e}", old.display()))?;
    let old_doc: Value = serde_json::from_str(&text).map_err(|e| format!("parse {}: {e}", old.display()))?;
    let of = |doc: &Value| match doc["ratios"].as_object() {
        Some(r) => r.clone(),
        None => ratios(&doc["rows"]),
    };
    let (new, old_r) = (of(new), of(&old_doc));
    let mut ok = true;
    println!("\nCost ratios against {} (rsandbox / peer; fails above 1.5x the old one):", old.display());
    for (key, value) in &new {
        let Some(n) = value.as_f64() else { continue };
        match old_r.get(key).and_then(Value::as_f64) {
            // rsandbox costing over 5x the peer: the peer is a floor (`/bin/true`) whose
            // few hundred microseconds are mostly the machine's noise, and so is the ratio.
            Some(o) if n > 5.0 || o > 5.0 => println!("  floor  {key}: {n:.3} (was {o:.3}; not judged)"),
            Some(o) if n > 1.5 * o => {
                ok = false;
                println!("  WORSE  {key}: {n:.3} (was {o:.3}, {:.0}% worse)", 100.0 * (n / o - 1.0));
            }
            Some(o) => println!("  ok     {key}: {n:.3} (was {o:.3})"),
            None => println!("  new    {key}: {n:.3} (not in the old file)"),
        }
    }
    Ok(ok)
}

pub fn verdict(measured: f64, target: f64, lower_is_better: bool, unit: &str) -> String {
    let met = if lower_is_better { measured <= target } else { measured >= target };
    if met {
        "met".into()
    } else if lower_is_better {
        format!("MISSED by {} {unit} ({:.1}x the target)", fmt_num(measured - target), measured / target)
    } else {
        format!("MISSED by {} {unit} ({:.0}% of the target)", fmt_num(target - measured), 100.0 * measured / target)
    }
}

pub fn targets(report: &mut Report) {
    let mut t = vec![];
    if let Some(m) = report.median_of("P1", "rsandbox Pool::eval (pre-forked)") {
        t.push(Target::new("P1 p50 <= 1 ms with a pre-forked child (Pool::eval)", m, "ms", 1.0, true));
    }
    if let (Some(tool), Some(plain)) = (
        report.median_of("P2", "rsandbox Session::execute echo(1) (tool)"),
        report.median_of("P2", "rsandbox Session::execute identity(1) (tool session, no call)"),
    ) {
        t.push(
            Target::new("P2 tool round trip <= 0.3 ms over the evaluation itself", tool - plain, "ms", 0.3, true)
                .detail(format!("median echo(1) {} - median identity(1) {}", fmt_num(tool), fmt_num(plain))),
        );
    }
    if let Some(m) = report.median_of("P2", "rsandbox Session::execute") {
        let mut context =
            Target::new("P2 warm session execute of 1+1 (context for the tool target)", m, "ms", 0.3, true);
        context.context = true;
        t.push(context);
    }
    let best = |prefix: &str, counts: &[usize]| {
        counts
            .iter()
            .filter_map(|c| report.baseline_median(&format!("{prefix} c={c}")).map(|m| (*c, m)))
            .fold(None, |acc: Option<(usize, f64)>, x| if acc.is_none_or(|a| x.1 > a.1) { Some(x) } else { acc })
    };
    if let Some((c, m)) = best("P3", &[1, 2, 8, 32]) {
        t.push(
            Target::new("P3 >= 400 evals/s on 2 cores (best concurrency)", m, "evals/s", 400.0, false)
                .detail(format!("at c={c}")),
        );
    }
    if let (Some(m), Some(r)) =
        (report.median_of("S1", "rsandbox serve --stdio eval"), report.median_of("S1", "Rscript --vanilla"))
    {
        t.push(
            Target::new("S1 fresh eval 1+1 p50 <= 1 ms through serve --stdio", m, "ms", 1.0, true)
                .against("Rscript --vanilla", r)
                .detail(format!("{:.0}x faster than Rscript; target >= 150x", r / m)),
        );
    }
    if let Some(m) = report.median_of("S1", "rsandbox serve --http POST /v1/eval") {
        t.push(Target::new("S1 fresh eval 1+1 p50 <= 1 ms through serve --http", m, "ms", 1.0, true));
    }
    if let Some(m) = report.median_of("C1", "rsandbox daemon: eval on its socket (no command process)") {
        t.push(Target::new("C1 fresh eval 1+1 p50 <= 1 ms through the daemon's socket", m, "ms", 1.0, true));
    }
    if let Some((c, m)) = best("S3", &[2, 8]) {
        t.push(
            Target::new("S3 >= 400 fresh evals/s on 2 cores through serve --stdio", m, "evals/s", 400.0, false)
                .detail(format!("at c={c}")),
        );
    }
    if let Some(m) = report.median_of("S2", "rsandbox stdio session.execute") {
        t.push(Target::new("S2 session execute(\"1+1\") p50 <= 0.3 ms through serve --stdio", m, "ms", 0.3, true));
    }
    if let (Some(idle), Some(warm)) =
        (report.median_of("S2", crate::fronts::IDLE_EXECUTE), report.median_of("S2", "rsandbox stdio session.execute"))
    {
        // Context for S1 and C1, which wait 15 ms before each request: the same execute
        // after as long idle, and (W) what that idleness costs on this machine alone.
        let name = "S2 session execute(\"1+1\") 15 ms after the previous answer (a figure: no target)";
        t.push(Target::figure(name, idle, "ms", "the same back to back", warm));
        if let (Some(idle_walk), Some(walk)) =
            (report.median_of("W", crate::fronts::IDLE_WALK), report.median_of("W", crate::fronts::WALK))
        {
            let name = "W a memory walk 15 ms after the previous one, no rsandbox (a figure: no target)";
            t.push(Target::figure(name, idle_walk, "ms", "the same back to back", walk));
        }
    }
    if let (Some(tool), Some(plain)) = (
        report.median_of("S2", "rsandbox stdio session.execute echo(1) (tool)"),
        report.median_of("S2", "rsandbox stdio session.execute identity(1) (no call)"),
    ) {
        t.push(Target::new(
            "S2 one tool-call round trip <= 0.3 ms through serve --stdio",
            tool - plain,
            "ms",
            0.3,
            true,
        ));
    }
    if let (Some(ours), Some(r)) =
        (report.median_of("C1", "rsandbox eval (daemon)"), report.median_of("C1", "Rscript --vanilla -e 1+1"))
    {
        t.push(
            Target::new("C1 `rsandbox eval '1+1'` end to end <= half of Rscript's", ours, "ms", r / 2.0, true)
                .against("Rscript --vanilla -e 1+1", r),
        );
    }
    let exec = report.median_of("P6", "rsandbox exec -- /bin/true");
    let unshare = "unshare -Urnpf --mount-proc /bin/true";
    if let (Some(ours), Some(u)) = (exec, report.median_of("P6", unshare)) {
        t.push(
            Target::new("P6 `rsandbox exec -- /bin/true` <= unshare -Urnpf --mount-proc", ours, "ms", u, true)
                .against(unshare, u),
        );
    }
    let bwrap = "bwrap --unshare-all --ro-bind / / /bin/true";
    if let (Some(ours), Some(b)) = (exec, report.median_of("P6", bwrap)) {
        t.push(
            Target::new("P6 `rsandbox exec -- /bin/true` <= half of bwrap --unshare-all", ours, "ms", b / 2.0, true)
                .against(bwrap, b),
        );
    }
    if let (Some(proxied), Some(direct)) = (
        report.median_of(crate::network::SCENARIO, crate::network::PROXIED),
        report.median_of(crate::network::SCENARIO, crate::network::DIRECT),
    ) {
        // Issue #27 asks for the figure, not a goal: printed beside the targets, never judged.
        let name = "N download through the egress proxy (a figure: no target)";
        t.push(
            Target::figure(name, proxied, "MB/s", crate::network::DIRECT, direct)
                .detail("the same download.file, timed inside R"),
        );
    }
    // The target is the lockdown while the cores are busy (the children of S3);
    // the one of a child forked on an idle machine (S1's) is shown beside it.
    let lockdown_of = |children: &str| {
        report.rows.iter().find(|r| r.scenario == "L" && r.system.ends_with(children)).and_then(|r| stats(&r.samples))
    };
    if let Some(s) = lockdown_of("children of S3") {
        t.push(Target::new(
            "L child lockdown <= 0.5 ms while the cores are busy (children of S3)",
            s.median,
            "us",
            500.0,
            true,
        ));
    }
    if let Some(m) = report.baseline_median("L") {
        t.push(Target::new(
            "L child lockdown <= 0.5 ms, forked alone on an idle machine (children of S1)",
            m,
            "us",
            500.0,
            true,
        ));
    }
    for k in [1, 10, 50] {
        if let Some(m) = report.baseline_median(&format!("P4 k={k}")) {
            t.push(Target::new(format!("P4 <= 5 MB PSS added per idle session (k={k})"), m, "MB", 5.0, true));
        }
    }
    let idle = report.rows.iter().find(|r| r.scenario.starts_with("I k=") && r.scenario.ends_with(" each"));
    if let Some(row) = idle {
        let k = row.scenario.trim_start_matches("I k=").trim_end_matches(" each").to_string();
        if let Some(s) = stats(&row.samples) {
            t.push(Target::new(
                format!("I <= 5 MB PSS per idle session with {k} open at once"),
                s.median,
                "MB",
                5.0,
                true,
            ));
        }
    }
    report.targets = t;
}
