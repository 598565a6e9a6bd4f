//! Snapshot restore, fuzzed (issue #24): a real snapshot, mutated deterministically
//! (bits flipped, bytes set, inserted, deleted, duplicated, the stream cut short), is
//! restored in a new session, again and again. Each must end as bad input (R refused it
//! inside the sandbox), as a session that works, or as a sandbox that crashed and was
//! replaced; never harm the supervisor (this process), another session or a pool.
//!
//! Not a libFuzzer target: a restore needs R and a sandbox (tens of milliseconds each),
//! so this is a bounded randomized test. `RSANDBOX_SNAPSHOT_FUZZ_CASES` (default 200)
//! and `RSANDBOX_SNAPSHOT_FUZZ_SEED` change the run; a failure names its case, seed and
//! input. Needs `cargo build --workspace` first (the zygote binary).

use base64::Engine as _;
use rsandbox::session::ExecuteOptions;
use rsandbox::{Engine, EngineConfig, EngineError, EvalOptions, Outcome, Pool};
use serde_json::json;
use std::time::Duration;

/// splitmix64: a seeded, dependency-free generator (the same cases on every machine).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One to four mutations of `bytes`.
fn mutate(rng: &mut Rng, original: &[u8]) -> Vec<u8> {
    let mut bytes = original.to_vec();
    for _ in 0..1 + rng.below(4) {
        if bytes.is_empty() {
            bytes.push(rng.next() as u8);
        }
        let at = rng.below(bytes.len());
        match rng.below(7) {
            0 => bytes[at] ^= 1 << rng.below(8),
            1 => bytes[at] = [0x00, 0xff, 0x7f, 0x80, 0x01, 0xfe][rng.below(6)],
            // An XDR integer (a length, a type, a flag) replaced by a large or odd one.
            2 => {
                let word = [0x7fff_ffffu32, 0xffff_ffff, 0x8000_0000, 0x0100_0000, 0xffff][rng.below(5)];
                let end = (at + 4).min(bytes.len());
                bytes[at..end].copy_from_slice(&word.to_be_bytes()[..end - at]);
            }
            3 => {
                let n = 1 + rng.below(16);
                let insert: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                bytes.splice(at..at, insert);
            }
            4 => {
                let end = (at + 1 + rng.below(32)).min(bytes.len());
                bytes.drain(at..end);
            }
            5 => {
                let end = (at + 1 + rng.below(64)).min(bytes.len());
                let copy = bytes[at..end].to_vec();
                let to = rng.below(bytes.len());
                bytes.splice(to..to, copy);
            }
            _ => bytes.truncate(at),
        }
    }
    bytes
}

fn quick() -> ExecuteOptions {
    ExecuteOptions { timeout: Duration::from_secs(10), ..ExecuteOptions::default() }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn crafted_snapshots_end_as_errors_or_crashes_and_harm_nothing_else() {
    let cases: usize = env_or("RSANDBOX_SNAPSHOT_FUZZ_CASES", 200);
    let seed: u64 = env_or("RSANDBOX_SNAPSHOT_FUZZ_SEED", 24);
    let engine = Engine::start(EngineConfig::default()).expect("engine starts (did you run cargo build --workspace?)");
    let options = EvalOptions { memory: Some(512 << 20), timeout: Duration::from_secs(10), ..EvalOptions::default() };

    // Bystanders: a session with state of its own, and a pool.
    let other = engine.session(options.clone(), vec![]).unwrap();
    assert_eq!(other.execute("keep <- 42; keep", &quick()).unwrap().value, json!(42));
    let pool = Pool::new(engine.clone(), 1, options.clone(), Duration::from_secs(30)).unwrap();

    // The snapshot to mutate: objects of many types, and a package to attach.
    let source = engine.session(options.clone(), vec![]).unwrap();
    let setup = "library(stats4); x <- 1:10; y <- c(a = 1.5, b = NA); s <- c('text', NA); b <- c(TRUE, NA); \
                 z <- complex(real = 1, imaginary = 2); r <- as.raw(0:3); f <- function(a, ...) a + 1; \
                 l <- list(a = 1, b = letters, c = list(NULL)); df <- data.frame(u = 1:3, v = c('a', 'b', 'c')); \
                 m <- matrix(1:6, 2); fa <- factor(c('p', 'q')); fo <- y ~ x + 1; \
                 q <- quote(f(x)[[1]])";
    assert_eq!(source.execute(setup, &quick()).unwrap().outcome, Outcome::Ok);
    let (snapshot, not_saved) = source.snapshot().unwrap();
    assert!(not_saved.is_empty(), "{not_saved:?}");
    let original = base64::engine::general_purpose::STANDARD.decode(&snapshot).unwrap();

    let (mut refused, mut restored, mut crashed) = (0, 0, 0);
    let mut rng = Rng(seed);
    for case in 0..cases {
        let bytes = mutate(&mut rng, &original);
        let crafted = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let context = || format!("case {case} (seed {seed}), snapshot {crafted}");
        match engine.restore_session(options.clone(), vec![], &crafted) {
            Err(EngineError::Input(_)) => refused += 1,
            // The sandbox died while restoring (or was stopped): it is replaced.
            Err(EngineError::Setup(why)) if why.contains("did not answer restore") => {
                eprintln!("case {case}: {why}");
                crashed += 1
            }
            Err(e) => panic!("{}: unexpected error {e:?}", context()),
            Ok((session, _warnings)) => {
                restored += 1;
                let r = session.execute("1 + 1", &quick()).unwrap_or_else(|e| panic!("{}: {e:?}", context()));
                let works = r.outcome == Outcome::Ok && r.value == json!(2);
                assert!(works || r.reset || r.outcome == Outcome::Crashed, "{}: {r:?}", context());
            }
        }
        if case % 50 == 49 {
            assert_eq!(other.execute("keep", &quick()).unwrap().value, json!(42), "{}", context());
        }
    }
    eprintln!("{cases} crafted snapshots: {refused} refused, {restored} restored, {crashed} crashed");

    // The untouched snapshot still restores; everything else still works.
    let (session, _) = engine.restore_session(options.clone(), vec![], &snapshot).unwrap();
    assert_eq!(session.execute("c(x[10], f(1), m[2, 3])", &quick()).unwrap().value, json!([10, 2, 6]));
    assert_eq!(other.execute("keep", &quick()).unwrap().value, json!(42));
    assert_eq!(engine.eval("1 + 1", &options).unwrap().value, json!(2));
    assert_eq!(pool.eval("2 + 2", None).unwrap().value, json!(4));
    assert!(refused > 0, "no mutation was refused: the mutations do not reach R's checks");
}
