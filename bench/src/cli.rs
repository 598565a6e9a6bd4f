//! Command-line options.

use clap::Parser;
use std::path::PathBuf;

/// rsandbox against its peers on this machine, every scenario interleaved.
#[derive(Parser)]
#[command(name = "rsandbox-bench")]
pub struct Args {
    /// Smoke run (about a minute).
    #[arg(long)]
    quick: bool,
    /// Results directory (default: bench/results of this tree).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Samples per system in the latency scenarios (default 40; quick 5).
    #[arg(short = 'n')]
    samples: Option<usize>,
    /// Print where a fresh session's time and memory go, then exit (not written to results).
    #[arg(long)]
    pub probe: bool,
    /// Run only these scenarios (comma-separated: P1,P2,M,P3,P4,I,P5,P6,S1,S2,S3,C1,G,N; S2 includes W);
    /// results go to `only-<list>.md`/`.json` instead of `latest.*`.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// After the run, compare its cost ratios (rsandbox against each peer) with those of
    /// this earlier results file (e.g. the committed bench/results/latest.json); exit 1
    /// when one is more than 50% worse. Ratios, not times: the machine is noisy.
    #[arg(long)]
    pub compare: Option<PathBuf>,
    /// Sessions held open at once in scenario I (memory of idle sessions at scale;
    /// default 500, quick 50).
    #[arg(long)]
    idle_sessions: Option<usize>,
    /// Size of the file scenario N downloads, in MiB (default 256, quick 32).
    #[arg(long)]
    download_mib: Option<u64>,
}

/// What a run does, derived from the options.
pub struct Cfg {
    pub quick: bool,
    /// Samples per system in the latency scenarios.
    pub n: usize,
    /// Rounds of the throughput and memory scenarios.
    pub rounds: usize,
    /// Seconds per throughput measurement.
    pub p3_secs: f64,
    pub p4_counts: Vec<usize>,
    /// Sessions held open at once in scenario I.
    pub idle_sessions: usize,
    /// Bytes of the file scenario N downloads.
    pub download_bytes: u64,
    /// Downloads per system in scenario N (each a whole file: fewer than the latency samples).
    pub downloads: usize,
    pub out: PathBuf,
    /// Where the R workers' stderr goes.
    pub log: PathBuf,
    /// The scenarios to run (empty: all).
    pub only: Vec<String>,
}

impl Args {
    pub fn cfg(&self) -> Cfg {
        let quick = self.quick;
        let n = self.samples.unwrap_or(if quick { 5 } else { 40 });
        Cfg {
            quick,
            n,
            rounds: if quick { 1 } else { 3 },
            p3_secs: if quick { 0.3 } else { 2.0 },
            p4_counts: if quick { vec![1, 5] } else { vec![1, 10, 50] },
            idle_sessions: self.idle_sessions.unwrap_or(if quick { 50 } else { 500 }),
            download_bytes: self.download_mib.unwrap_or(if quick { 32 } else { 256 }).clamp(1, 1 << 20) << 20,
            downloads: (n / 4).max(3),
            out: self.out.clone().unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results")),
            log: std::env::temp_dir().join(format!("rsandbox-bench-{}.log", std::process::id())),
            only: self.only.iter().map(|s| s.trim().to_ascii_uppercase()).collect(),
        }
    }
}

impl Cfg {
    /// Whether scenario `id` is part of this run.
    pub fn runs(&self, id: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == id)
    }

    /// The stem of the result files: `latest`, or `only-P1-M` for a partial run.
    pub fn results_stem(&self) -> String {
        if self.only.is_empty() {
            "latest".into()
        } else {
            format!("only-{}", self.only.join("-"))
        }
    }
}
