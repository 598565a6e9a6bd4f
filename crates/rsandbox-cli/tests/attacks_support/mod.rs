//! The runner of the adversarial corpus in `tests/attacks/` (see its README.md).
//!
//! One run = one identity (root, the unprivileged `rsandbox-attack` user, or the
//! unsandboxed calibration). A run plants secrets, starts a long-lived "victim" sandbox,
//! then runs every case on a few worker threads, each case with its own listeners, its
//! own target files and its own hard link of the zygote (so the processes of one case can
//! be told apart from those of the cases running beside it), and checks what it did.

#![allow(dead_code)]

#[path = "../common/cli_under_test.rs"]
mod cli_under_test;
#[path = "../common/container.rs"]
mod container;
use crate::engine_dirs::{all_engine_dirs, engine_dirs_of};
use base64::Engine as _;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

// =======================================================================================
// Constants and the vocabulary of the header.
// =======================================================================================

/// The unprivileged account of the `as_user` run.
pub const ATTACK_USER: &str = "rsandbox-attack";
/// Sandboxes started by root run under uids from here up.
pub const SANDBOX_UID_BASE: u32 = 2_000_000_000;
/// Categories, one directory each under `tests/attacks/`.
pub const CATEGORIES: [&str; 9] =
    ["files", "exec", "network", "kernel", "resources", "protocol", "environment", "allowlist", "legit"];
/// Outcomes of the JSON result, with the CLI's exit status for each.
pub const OUTCOMES: [(&str, i32); 10] = [
    ("ok", 0),
    ("error", 1),
    ("timeout", 3),
    ("cpu_limit", 4),
    ("memory_limit", 5),
    ("output_limit", 6),
    ("file_size_limit", 7),
    ("process_limit", 8),
    ("violation", 9),
    ("crashed", 10),
];
/// The expected outcome of code a function allowlist refuses before it runs: no result,
/// exit 2 (bad input), and stderr naming the first function not allowed.
pub const REFUSED: &str = "refused";
/// Slack over a case's `--timeout` for R start-up and clean-up.
pub const TIME_SLACK: f64 = 3.0;
/// A CLI call that takes longer than this is killed (a hang is a failure, not a stall).
const CALL_LIMIT: Duration = Duration::from_secs(120);
/// Bytes a result may carry over `--max-output` (JSON punctuation around the parts).
const OUTPUT_SLACK: u64 = 4096;
/// How long sandbox processes may linger after the CLI exited.
const LINGER: Duration = Duration::from_secs(2);
/// Processes the victim sandbox holds (forked sleepers), besides itself.
const VICTIM_SLEEPERS: usize = 21;

#[path = "../common/cran.rs"]
#[allow(dead_code)]
mod cran;

/// The names a network case's profile pins (`[network] hosts`), besides `cran.test`:
/// each resolves where the sandbox must never go, whatever the allowlist says.
pub const NETWORK_HOSTS: [(&str, &str); 4] = [
    ("loopback.test", "127.0.0.1"),
    ("metadata.test", "169.254.169.254"),
    ("private.test", "10.0.0.1"),
    ("mapped.test", "::ffff:127.0.0.1"),
];
/// The caps of a network case's profile: small, so the cases that go over them end fast.
const NETWORK_CAPS: &str =
    "max_download = \"8M\"\nmax_concurrent = 16\nmax_connections = 64\nconnect_timeout = 3\nidle_timeout = 3\n";

/// The test host of the network cases, started once (`None`: not root).
fn cran_server() -> Option<&'static cran::CranServer> {
    static SERVER: OnceLock<Option<cran::CranServer>> = OnceLock::new();
    SERVER.get_or_init(cran::CranServer::start).as_ref()
}

/// What a case may go after (`# targets:`).
pub const TARGETS: [&str; 31] = [
    "none",
    "secret:home",
    "secret:ssh",
    "secret:documents",
    "secret:etc",
    "secret:shm",
    "secret:tmp",
    "secret:victim",
    "secret:env",
    "listener:tcp",
    "listener:udp",
    "listener:unix",
    "listener:abstract",
    "listener:dns",
    "file:home-target",
    "file:tmp-target",
    "file:ssh-target",
    "file:new-home",
    "file:new-tmp",
    "file:new-shm",
    "file:new-etc",
    "file:new-var-tmp",
    "file:site-library",
    "file:r-profile-site",
    "file:zygote",
    "proc:sleeper",
    "lock:r-library",
    "proc:victim",
    "proc:parent",
    "host:resources",
    "host:cran",
];

/// Placeholders and the target a case must declare to use each (None: no target).
pub const PLACEHOLDERS: [(&str, Option<&str>); 37] = [
    ("HOME", None),
    ("OUTPUT_DIR", None),
    ("PROBE_HEX", None),
    ("CASE_ID", None),
    ("TOKEN_FILE_HOME", Some("secret:home")),
    ("SSH_KEY", Some("secret:ssh")),
    ("DOCUMENTS", Some("secret:documents")),
    ("CARDS_FILE", Some("secret:documents")),
    ("CARD_1", Some("secret:documents")),
    ("CARD_2", Some("secret:documents")),
    ("ETC_SECRET", Some("secret:etc")),
    ("SHM_SECRET", Some("secret:shm")),
    ("TMP_SECRET", Some("secret:tmp")),
    ("VICTIM_FILE", Some("secret:victim")),
    ("VICTIM_WS", Some("secret:victim")),
    ("VICTIM_ROOT_FILE", Some("secret:victim")),
    ("VICTIM_PID", Some("proc:victim")),
    ("TCP_PORT", Some("listener:tcp")),
    ("UDP_PORT", Some("listener:udp")),
    ("UNIX_PATH", Some("listener:unix")),
    ("ABSTRACT_NAME", Some("listener:abstract")),
    ("DNS_NAME", Some("listener:dns")),
    ("TARGET_HOME", Some("file:home-target")),
    ("TARGET_TMP", Some("file:tmp-target")),
    ("TARGET_SSH", Some("file:ssh-target")),
    ("NEW_HOME", Some("file:new-home")),
    ("NEW_TMP", Some("file:new-tmp")),
    ("NEW_SHM", Some("file:new-shm")),
    ("NEW_ETC", Some("file:new-etc")),
    ("NEW_VAR_TMP", Some("file:new-var-tmp")),
    ("NEW_SITE_LIBRARY", Some("file:site-library")),
    ("RPROFILE_SITE", Some("file:r-profile-site")),
    ("ZYGOTE_PATH", Some("file:zygote")),
    ("SLEEPER_PID", Some("proc:sleeper")),
    ("LOCKED_R_FILE", Some("lock:r-library")),
    ("CRAN_HOST", Some("host:cran")),
    ("CRAN_CA", Some("host:cran")),
];

const KEYS: [&str; 28] = [
    "category",
    "summary",
    "args",
    "expect",
    "expect-violation",
    "expect-stdout",
    "expect-stdout-contains",
    "expect-stdout-not",
    "expect-error-contains",
    "expect-value",
    "expect-plots",
    "targets",
    "calibrate",
    "calibrate-expect-exit",
    "calibrate-expect-stdout-contains",
    "calibrate-expect-received",
    "calibrate-expect-changed",
    "calibrate-timeout",
    "calibrate-net",
    "calibrate-pidns",
    "container-expect",
    "container-loses",
    "docker-expect",
    "no-private-root-expect",
    "compile-expect",
    "functions",
    "network",
    "nolandlock-loses",
];
/// Keys that may appear more than once.
const REPEATABLE: [&str; 5] = [
    "expect-stdout-contains",
    "expect-stdout-not",
    "expect-error-contains",
    "calibrate-expect-stdout-contains",
    "calibrate-expect-changed",
];

// =======================================================================================
// The corpus: parsing the headers.
// =======================================================================================

/// Whether (and why not) a case runs unsandboxed in the calibration.
#[derive(Clone, Debug, PartialEq)]
pub enum Calibrate {
    Yes,
    No(String),
}

/// How a case fares in the namespace-less container rows, when not as on the host.
#[derive(Clone, Debug, PartialEq)]
pub enum ContainerRule {
    /// Other outcomes (the case-specific checks are not made), and why.
    Expect { outcomes: Vec<String>, reason: String },
    /// A known loss of the mode: the case-specific checks are not made (secrets, host
    /// files, listeners and processes still are), and the run lists it with the reason.
    Loses(String),
}

/// The rule a mode applies to a case, if the mode cannot hold it as the host does.
/// `container-expect` says what a runtime's own refusal turns an outcome into, so it
/// applies where an environment filter refuses first: the emulated containers, and
/// (for the user-namespace calls it refuses, beside the host's outcome) the row without
/// user namespaces; in a chroot nothing refuses first. `container-loses` applies to
/// every row without namespaces. `no-private-root-expect` says what the lack of a private
/// root changes (by-path metadata calls and record locks are refused there), so it
/// applies to every row without namespaces, before the rules above.
fn rule_for(mode: Mode, case: &Case) -> Option<ContainerRule> {
    if let Some(rule) = case.no_private_root.as_ref().filter(|_| !mode.private_root()) {
        return Some(rule.clone());
    }
    match (mode, &case.container) {
        (Mode::NoLandlockRoot, _) => case.no_landlock.clone(),
        (Mode::CompileProfileRoot, _) => case.compile.clone(),
        (Mode::ContainerRoot | Mode::ContainerUser, rule) => rule.clone(),
        // Docker's profile refuses first, as the emulated one does, and more calls.
        (Mode::DockerRoot | Mode::DockerUser, rule) => case.docker.clone().or_else(|| rule.clone()),
        (Mode::NoUserNamespacesUser, Some(ContainerRule::Expect { outcomes, reason })) => {
            let mut either = case.outcomes.clone();
            either.extend(outcomes.iter().filter(|o| !case.outcomes.contains(o)).cloned());
            Some(ContainerRule::Expect { outcomes: either, reason: reason.clone() })
        }
        (Mode::NoUserNamespacesUser | Mode::ChrootRoot, Some(ContainerRule::Loses(reason))) => {
            Some(ContainerRule::Loses(reason.clone()))
        }
        _ => None,
    }
}

/// One case file.
#[derive(Clone, Debug)]
pub struct Case {
    /// `category/stem`.
    pub name: String,
    pub path: PathBuf,
    pub category: String,
    pub summary: String,
    pub args: Vec<String>,
    /// Accepted outcomes (usually one).
    pub outcomes: Vec<String>,
    pub violation: Option<Vec<String>>,
    pub stdout_exact: Option<String>,
    pub stdout_contains: Vec<String>,
    pub stdout_not: Vec<String>,
    pub error_contains: Vec<String>,
    pub value: Option<Value>,
    pub plots: Option<usize>,
    pub targets: BTreeSet<String>,
    pub calibrate: Calibrate,
    pub cal_exit: i32,
    pub cal_stdout_contains: Vec<String>,
    pub cal_received: Vec<String>,
    pub cal_changed: Vec<String>,
    pub cal_timeout: f64,
    /// Whether the calibration gets a private network namespace (default: yes unless
    /// the case targets a host listener, which must be reachable unsandboxed).
    pub cal_net: bool,
    /// Whether the calibration gets a private pid namespace (default: yes; `no` for
    /// cases that must see host processes, e.g. through /proc/<pid>/root).
    pub cal_pidns: bool,
    /// What the namespace-less container rows expect instead, when they differ.
    pub container: Option<ContainerRule>,
    /// What the real Docker rows expect instead (Docker's profile refuses more calls
    /// than the namespace and mount ones the emulated container refuses); before
    /// `container`.
    pub docker: Option<ContainerRule>,
    /// What the rows without a private root (no namespaces) expect instead.
    pub no_private_root: Option<ContainerRule>,
    /// What the row without Landlock cannot hold, and why.
    pub no_landlock: Option<ContainerRule>,
    /// The outcome under the `compile` profile, where programs may run: present on the
    /// cases that run a program the profile does not list, or reach what no program may
    /// (the compile row runs only these).
    pub compile: Option<ContainerRule>,
    /// The function allowlist the case runs under (a profile's `functions`: names and
    /// sets), when it has one.
    pub functions: Option<Vec<String>>,
    /// The network allowlist the case runs under (a profile's `[network] allow`), with
    /// the test host `cran.test` ([`cran::CranServer`]) and the attack names of
    /// [`NETWORK_HOSTS`]; rows without namespaces must refuse it.
    pub network: Option<Vec<String>>,
    /// The file's text (header included); placeholders not yet substituted.
    pub source: String,
    /// Placeholders used anywhere in the file.
    pub placeholders: BTreeSet<String>,
}

impl Case {
    /// The `--timeout` the case runs with (the CLI's default is 30 s).
    pub fn timeout(&self) -> f64 {
        let mut it = self.args.iter();
        while let Some(a) = it.next() {
            if a == "--timeout" {
                return it.next().and_then(|v| v.parse().ok()).unwrap_or(30.0);
            }
            if let Some(v) = a.strip_prefix("--timeout=") {
                return v.parse().unwrap_or(30.0);
            }
        }
        30.0
    }

    /// The `--max-output` the case runs with, in bytes (the CLI's default is 16M).
    pub fn max_output(&self) -> u64 {
        let parse = |v: &str| -> Option<u64> {
            let t = v.trim();
            let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
            let (digits, unit) = t.split_at(split);
            let shift = match unit.to_ascii_uppercase().trim_end_matches(['B', 'I']) {
                "" => 0,
                "K" => 10,
                "M" => 20,
                "G" => 30,
                _ => return None,
            };
            digits.parse::<u64>().ok().map(|n| n << shift)
        };
        let mut it = self.args.iter();
        while let Some(a) = it.next() {
            if a == "--max-output" {
                return it.next().and_then(|v| parse(v)).unwrap_or(16 << 20);
            }
            if let Some(v) = a.strip_prefix("--max-output=") {
                return parse(v).unwrap_or(16 << 20);
            }
        }
        16 << 20
    }

    pub fn targets_listener(&self) -> bool {
        self.targets.iter().any(|t| t.starts_with("listener:"))
    }
}

/// `tests/attacks/` in this workspace.
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/attacks").canonicalize().expect("tests/attacks exists")
}

/// Decode `\n`, `\t`, `\\` in a header value.
fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            Some('#') => out.push('#'),
            other => return Err(format!("unknown escape \\{}", other.map(String::from).unwrap_or_default())),
        }
    }
    Ok(out)
}

/// Every `{{NAME}}` in `text`.
fn placeholders_in(text: &str) -> Result<BTreeSet<String>, String> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or_else(|| "unterminated {{".to_string())?;
        let name = &after[..end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') {
            return Err(format!("malformed placeholder {{{{{name}}}}}"));
        }
        if !PLACEHOLDERS.iter().any(|(p, _)| *p == name) {
            return Err(format!("unknown placeholder {{{{{name}}}}}"));
        }
        found.insert(name.to_string());
        rest = &after[end + 2..];
    }
    Ok(found)
}

/// Parse one case file. Every error names the problem; the caller names the file.
pub fn parse_case(path: &Path, root: &Path) -> Result<Case, String> {
    let source = fs::read_to_string(path).map_err(|e| format!("unreadable: {e}"))?;
    let rel = path.strip_prefix(root).map_err(|_| "outside the corpus".to_string())?;
    let comps: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if comps.len() != 2 {
        return Err("a case must live in tests/attacks/<category>/<name>.R".into());
    }
    let dir_category = comps[0].clone();
    let stem = rel.file_stem().unwrap().to_string_lossy().into_owned();
    if !stem.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return Err(format!("case name {stem:?} must be lowercase letters, digits and _"));
    }

    let mut fields: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut header_lines = 0;
    for (n, line) in source.lines().enumerate() {
        if !line.starts_with('#') {
            break;
        }
        header_lines += 1;
        let body =
            line.strip_prefix("# ").ok_or_else(|| format!("line {}: header lines must be `# key: value`", n + 1))?;
        let (key, value) =
            body.split_once(':').ok_or_else(|| format!("line {}: header line without `key:`: {line:?}", n + 1))?;
        let key = key.trim();
        if !KEYS.contains(&key) {
            return Err(format!("line {}: unknown header key {key:?}", n + 1));
        }
        let value = value.trim();
        if value.is_empty() {
            return Err(format!("line {}: empty value for {key:?}", n + 1));
        }
        let entry = fields.entry(key.to_string()).or_default();
        if !entry.is_empty() && !REPEATABLE.contains(&key) {
            return Err(format!("line {}: {key:?} given twice", n + 1));
        }
        entry.push(value.to_string());
    }
    if header_lines == 0 {
        return Err("missing header (the file must start with `# key: value` lines)".into());
    }
    let one = |k: &str| fields.get(k).map(|v| v[0].clone());
    let many = |k: &str| fields.get(k).cloned().unwrap_or_default();
    let required = |k: &str| one(k).ok_or_else(|| format!("missing required header {k:?}"));

    let category = required("category")?;
    if !CATEGORIES.contains(&category.as_str()) {
        return Err(format!("unknown category {category:?} (one of {CATEGORIES:?})"));
    }
    if category != dir_category {
        return Err(format!("category {category:?} but the file is in {dir_category}/"));
    }
    let summary = required("summary")?;

    let args: Vec<String> = one("args").map(|a| a.split_whitespace().map(String::from).collect()).unwrap_or_default();
    for a in &args {
        let bare = a.split('=').next().unwrap();
        if ["--json", "--best-effort", "--no-namespaces", "--audit-log", "--preload"].contains(&bare) {
            return Err(format!("args may not contain {bare} (the runner decides the lockdown)"));
        }
    }

    // `outcome=<o>[|<o>…] — <reason>`
    let expect_rule = |key: &str, v: &str| -> Result<ContainerRule, String> {
        let (outcomes, reason) =
            v.split_once(" — ").ok_or_else(|| format!("{key} must be `outcome=<o>[|<o>…] — <reason>`, got {v:?}"))?;
        Ok(ContainerRule::Expect { outcomes: parse_outcomes(key, outcomes, &[])?, reason: reason.trim().to_string() })
    };
    let container = match (one("container-expect"), one("container-loses")) {
        (Some(_), Some(_)) => return Err("container-expect and container-loses exclude each other".into()),
        (Some(v), None) => Some(expect_rule("container-expect", &v)?),
        (None, Some(reason)) => Some(ContainerRule::Loses(reason.to_string())),
        (None, None) => None,
    };
    let compile = one("compile-expect").map(|v| expect_rule("compile-expect", &v)).transpose()?;
    let docker = one("docker-expect").map(|v| expect_rule("docker-expect", &v)).transpose()?;
    let outcomes = parse_outcomes("expect", &required("expect")?, &[REFUSED])?;
    let functions = one("functions")
        .map(|f| f.split(',').map(|n| n.trim().to_string()).filter(|n| !n.is_empty()).collect::<Vec<_>>());
    let network = one("network")
        .map(|f| f.split(',').map(|n| n.trim().to_string()).filter(|n| !n.is_empty()).collect::<Vec<_>>());
    if network.is_some() && functions.is_some() {
        return Err("network and functions: one profile per case".into());
    }
    if outcomes.iter().any(|o| o == REFUSED) && (outcomes.len() > 1 || functions.is_none()) {
        return Err(format!("outcome={REFUSED} stands alone, and only under a function allowlist (`functions:`)"));
    }
    let violation = one("expect-violation").map(|v| v.split('|').map(|s| s.trim().to_string()).collect::<Vec<_>>());
    if violation.is_some() && !outcomes.iter().any(|o| o == "violation") {
        return Err("expect-violation without outcome=violation".into());
    }
    let stdout_exact = one("expect-stdout").map(|s| unescape(&s)).transpose()?;
    let unescape_all = |v: Vec<String>| v.iter().map(|s| unescape(s)).collect::<Result<Vec<_>, _>>();
    let stdout_contains = unescape_all(many("expect-stdout-contains"))?;
    let stdout_not = unescape_all(many("expect-stdout-not"))?;
    let error_contains = unescape_all(many("expect-error-contains"))?;
    let value = one("expect-value")
        .map(|v| serde_json::from_str::<Value>(&v).map_err(|e| format!("expect-value is not JSON ({e}): {v}")))
        .transpose()?;
    let plots = one("expect-plots")
        .map(|p| p.parse::<usize>().map_err(|_| format!("expect-plots: not a count: {p}")))
        .transpose()?;

    let targets_raw = required("targets")?;
    let targets: BTreeSet<String> = targets_raw
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    for t in &targets {
        if !TARGETS.contains(&t.as_str()) {
            return Err(format!("unknown target {t:?}"));
        }
    }
    if targets.contains("none") && targets.len() > 1 {
        return Err("targets: `none` cannot be combined with other targets".into());
    }

    let cal = required("calibrate")?;
    let calibrate = if cal == "yes" {
        Calibrate::Yes
    } else if let Some(reason) = cal.strip_prefix("no") {
        let reason = reason.trim_start().trim_start_matches(['—', '-', ':', '(']).trim().trim_end_matches(')').trim();
        if reason.len() < 10 {
            return Err("calibrate: no needs a reason (`no — <why>`)".into());
        }
        Calibrate::No(reason.to_string())
    } else {
        return Err(format!("calibrate must be `yes` or `no — <reason>`, got {cal:?}"));
    };
    let cal_exit = one("calibrate-expect-exit")
        .map(|v| v.parse::<i32>().map_err(|_| format!("calibrate-expect-exit: not an integer: {v}")))
        .transpose()?
        .unwrap_or(0);
    let cal_stdout_contains = unescape_all(many("calibrate-expect-stdout-contains"))?;
    let cal_received: Vec<String> = one("calibrate-expect-received")
        .map(|v| v.split(|c: char| c == ',' || c.is_whitespace()).filter(|s| !s.is_empty()).map(String::from).collect())
        .unwrap_or_default();
    for l in &cal_received {
        if !["tcp", "udp", "unix", "abstract", "dns"].contains(&l.as_str()) {
            return Err(format!("calibrate-expect-received: unknown listener {l:?}"));
        }
        if !targets.contains(&format!("listener:{l}")) {
            return Err(format!("calibrate-expect-received: {l} but listener:{l} is not in targets"));
        }
    }
    let cal_changed: Vec<String> = many("calibrate-expect-changed")
        .iter()
        .flat_map(|v| {
            v.split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    for f in &cal_changed {
        if !(f.starts_with("file:") || f == "proc:sleeper") || !targets.contains(f) {
            return Err(format!(
                "calibrate-expect-changed: {f:?} must be a file: target or proc:sleeper listed in targets"
            ));
        }
    }
    let cal_timeout = one("calibrate-timeout")
        .map(|v| v.parse::<f64>().map_err(|_| format!("calibrate-timeout: not a number: {v}")))
        .transpose()?
        .unwrap_or(30.0);
    let cal_net = match one("calibrate-net").as_deref() {
        None => !targets.iter().any(|t| t.starts_with("listener:")),
        Some("yes") => true,
        Some("no") => false,
        Some(other) => return Err(format!("calibrate-net must be yes or no, got {other:?}")),
    };
    let cal_pidns = match one("calibrate-pidns").as_deref() {
        None | Some("yes") => true,
        Some("no") => false,
        Some(other) => return Err(format!("calibrate-pidns must be yes or no, got {other:?}")),
    };
    let has_cal_expect = !cal_stdout_contains.is_empty() || !cal_received.is_empty() || !cal_changed.is_empty();
    match &calibrate {
        Calibrate::Yes if !has_cal_expect => {
            return Err("calibrate: yes needs at least one calibrate-expect-stdout-contains/-received/-changed \
                        (what \"the attack works\" means unsandboxed)"
                .into())
        }
        Calibrate::No(_) if has_cal_expect || fields.contains_key("calibrate-expect-exit") => {
            return Err("calibrate-expect-* lines on a case that is not calibrated".into())
        }
        _ => {}
    }
    if category == "legit" && outcomes != ["ok"] {
        return Err("legit cases must expect outcome=ok".into());
    }
    if category == "legit" && value.is_none() && stdout_exact.is_none() && plots.is_none() {
        return Err("legit cases need an exact expectation (expect-value, expect-stdout or expect-plots)".into());
    }
    if category != "legit"
        && outcomes == ["ok"]
        && stdout_contains.is_empty()
        && stdout_exact.is_none()
        && value.is_none()
    {
        return Err("an attack expected to end `ok` must say what it printed (expect-stdout-contains/-value)".into());
    }

    let placeholders = placeholders_in(&source)?;
    for p in &placeholders {
        let (_, needed) = PLACEHOLDERS.iter().find(|(n, _)| n == p).unwrap();
        if let Some(t) = needed {
            if !targets.contains(*t) {
                return Err(format!("uses {{{{{p}}}}} but {t} is not in targets"));
            }
        }
    }
    Ok(Case {
        name: format!("{category}/{stem}"),
        path: path.to_path_buf(),
        category,
        summary,
        args,
        outcomes,
        violation,
        stdout_exact,
        stdout_contains,
        stdout_not,
        error_contains,
        value,
        plots,
        targets,
        calibrate,
        cal_exit,
        cal_stdout_contains,
        cal_received,
        cal_changed,
        cal_timeout,
        cal_net,
        cal_pidns,
        container,
        docker,
        no_private_root: one("no-private-root-expect")
            .map(|v| expect_rule("no-private-root-expect", &v))
            .transpose()?,
        no_landlock: one("nolandlock-loses").map(|reason| ContainerRule::Loses(reason.to_string())),
        compile,
        functions,
        network,
        source,
        placeholders,
    })
}

/// `outcome=<o>[|<o>…]` (the value of `key`): each a result outcome, or one of `also`.
fn parse_outcomes(key: &str, value: &str, also: &[&str]) -> Result<Vec<String>, String> {
    let outcomes: Vec<String> = value
        .strip_prefix("outcome=")
        .ok_or_else(|| format!("{key} must be `outcome=<o>[|<o>…]`, got {value:?}"))?
        .split('|')
        .map(|o| o.trim().to_string())
        .collect();
    if let Some(bad) = outcomes.iter().find(|o| !OUTCOMES.iter().any(|(n, _)| n == o) && !also.contains(&o.as_str())) {
        return Err(format!("unknown outcome {bad:?} in {key}"));
    }
    Ok(outcomes)
}

/// Every case, sorted by name; panics naming every malformed file.
pub fn load_corpus() -> Vec<Case> {
    let root = corpus_dir();
    let mut files = Vec::new();
    let mut stray = Vec::new();
    for entry in fs::read_dir(&root).expect("read tests/attacks") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name == "native" {
                continue;
            }
            for f in fs::read_dir(&path).expect("read a category dir") {
                let f = f.expect("dir entry").path();
                if f.extension().is_some_and(|e| e == "R") {
                    files.push(f);
                } else {
                    stray.push(f);
                }
            }
        } else if path.extension().is_some_and(|e| e == "R") {
            stray.push(path);
        }
    }
    files.sort();
    let mut cases = Vec::new();
    let mut errors = Vec::new();
    for f in &stray {
        errors.push(format!("{}: not a case (cases are tests/attacks/<category>/<name>.R)", f.display()));
    }
    for f in &files {
        match parse_case(f, &root) {
            Ok(c) => cases.push(c),
            Err(e) => errors.push(format!("{}: {e}", f.display())),
        }
    }
    assert!(
        errors.is_empty(),
        "malformed attack cases (fix the header; nothing is skipped):\n  {}",
        errors.join("\n  ")
    );
    cases
}

// =======================================================================================
// Process-wide set-up: root, the user, binaries, the probe, the DNS listener.
// =======================================================================================

/// Serialises the three corpus tests (each runs its cases in parallel itself).
pub static RUN_LOCK: Mutex<()> = Mutex::new(());

#[derive(Clone, Copy, Debug)]
pub struct Account {
    pub uid: u32,
    pub gid: u32,
    pub home: &'static str,
}

fn lookup_user(name: &str) -> Option<(u32, u32, String)> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        (f.len() >= 6 && f[0] == name)
            .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?, f[5].to_string())))
            .flatten()
    })
}

/// The attack user, created when missing.
pub fn attack_user() -> Account {
    static USER: OnceLock<Account> = OnceLock::new();
    *USER.get_or_init(|| {
        if lookup_user(ATTACK_USER).is_none() {
            let out = Command::new("useradd")
                .args(["--create-home", "--shell", "/bin/bash", ATTACK_USER])
                .output()
                .expect("run useradd");
            assert!(
                out.status.success() || out.status.code() == Some(9),
                "useradd {ATTACK_USER}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let (uid, gid, home) = lookup_user(ATTACK_USER).expect("the attack user exists after useradd");
        assert_ne!(uid, 0);
        let home: &'static str = Box::leak(home.into_boxed_str());
        if !Path::new(home).is_dir() {
            fs::create_dir_all(home).expect("create the attack user's home");
            std::os::unix::fs::chown(home, Some(uid), Some(gid)).expect("chown home");
        }
        Account { uid, gid, home }
    })
}

/// Copies of the binaries (0755 dir) and the compiled probe.
pub struct Setup {
    pub dir: PathBuf,
    pub cli: PathBuf,
    pub zygote: PathBuf,
    pub probe_hex: String,
    pub dns: Arc<DnsListener>,
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf)).expect("read /dev/urandom");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

fn random_digits(n: usize) -> String {
    let mut buf = vec![0u8; n];
    fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf)).expect("read /dev/urandom");
    buf.iter().map(|b| char::from(b'0' + b % 10)).collect()
}

/// Remove leftovers of earlier runs whose process is gone.
fn remove_stale(prefixes: &[&str]) {
    let Ok(entries) = fs::read_dir("/tmp") else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        for prefix in prefixes {
            if let Some(pid) = name.strip_prefix(prefix).and_then(|p| p.split('-').next()) {
                if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
                    let p = entry.path();
                    make_removable(&p);
                    fs::remove_dir_all(&p).or_else(|_| fs::remove_file(&p)).ok();
                }
            }
        }
    }
}

fn make_removable(path: &Path) {
    let Ok(meta) = fs::symlink_metadata(path) else { return };
    if meta.is_dir() {
        fs::set_permissions(path, fs::Permissions::from_mode(0o700)).ok();
        if let Ok(entries) = fs::read_dir(path) {
            for e in entries.flatten() {
                make_removable(&e.path());
            }
        }
    }
}

pub fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        // SAFETY: geteuid cannot fail.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(euid, 0, "the attack corpus must run as root (it plants secrets and switches users)");
        attack_user();
        remove_stale(&["rsandbox-attack-bin-", "rsandbox-attack-run-", "rsandbox-attack-cal-"]);
        let cli_src = cli_under_test::cli_under_test();
        let zygote_src = PathBuf::from(env!("CARGO_BIN_EXE_rsandbox")).with_file_name("rsandbox-zygote");
        assert!(zygote_src.is_file(), "{} is missing: run `cargo build --workspace` first", zygote_src.display());
        let dir = PathBuf::from(format!("/tmp/rsandbox-attack-bin-{}-{}", std::process::id(), random_hex(4)));
        fs::create_dir(&dir).expect("create the binaries dir");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let copy = |src: &Path| {
            let dst = dir.join(src.file_name().unwrap());
            fs::copy(src, &dst).unwrap_or_else(|e| panic!("copy {}: {e}", src.display()));
            fs::set_permissions(&dst, fs::Permissions::from_mode(0o755)).unwrap();
            dst
        };
        let cli = copy(&cli_src);
        // Beside the CLI, as installed (the corpus runs no server, but `rsandbox` looks there).
        copy(Path::new(env!("CARGO_BIN_EXE_rsandbox-server")));
        let zygote = copy(&zygote_src);
        let probe_src = corpus_dir().join("native/probe.c");
        let probe_so = dir.join("probe.so");
        let out = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-s", "-Wall", "-o"])
            .arg(&probe_so)
            .arg(&probe_src)
            .output()
            .expect("run cc");
        assert!(
            out.status.success(),
            "compiling {} failed:\n{}",
            probe_src.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let bytes = fs::read(&probe_so).expect("read probe.so");
        let probe_hex = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Setup { dir, cli, zygote, probe_hex, dns: DnsListener::start() }
    })
}

// =======================================================================================
// Listeners.
// =======================================================================================

/// The UDP 127.0.0.1:53 listener the calibration's resolver is pointed at. It keeps
/// every packet, so each case can look for its own query name.
pub struct DnsListener {
    pub error: Option<String>,
    packets: Mutex<Vec<Vec<u8>>>,
}

impl DnsListener {
    fn start() -> Arc<DnsListener> {
        match UdpSocket::bind("127.0.0.1:53") {
            Ok(sock) => {
                let me = Arc::new(DnsListener { error: None, packets: Mutex::new(Vec::new()) });
                let weak = Arc::downgrade(&me);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 2048];
                    while let Ok((n, _)) = sock.recv_from(&mut buf) {
                        match weak.upgrade() {
                            Some(me) => me.packets.lock().unwrap().push(buf[..n].to_vec()),
                            None => return,
                        }
                    }
                });
                me
            }
            Err(e) => Arc::new(DnsListener {
                error: Some(format!("bind 127.0.0.1:53: {e}")),
                packets: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Packets that mention `label` (a DNS label is stored as-is in the query).
    pub fn packets_with(&self, label: &str) -> usize {
        self.packets
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p.windows(label.len()).any(|w| w.eq_ignore_ascii_case(label.as_bytes())))
            .count()
    }
}

/// What one case's listeners received.
#[derive(Default, Debug)]
pub struct Received {
    pub connections: AtomicU64,
    pub bytes: AtomicU64,
}

/// A TCP, a UDP, a pathname unix and an abstract unix listener, counting everything.
pub struct Listeners {
    pub tcp_port: u16,
    pub udp_port: u16,
    pub unix_path: PathBuf,
    pub abstract_name: String,
    pub tcp: Arc<Received>,
    pub udp: Arc<Received>,
    pub unix: Arc<Received>,
    pub abs: Arc<Received>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Listeners {
    pub fn start(tag: &str) -> Listeners {
        use std::os::linux::net::SocketAddrExt;
        let tcp_l = TcpListener::bind("127.0.0.1:0").expect("bind tcp");
        tcp_l.set_nonblocking(true).unwrap();
        let udp_s = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
        udp_s.set_nonblocking(true).unwrap();
        let unix_path = PathBuf::from(format!("/tmp/{tag}.sock"));
        fs::remove_file(&unix_path).ok();
        let unix_l = UnixListener::bind(&unix_path).expect("bind unix");
        fs::set_permissions(&unix_path, fs::Permissions::from_mode(0o666)).unwrap();
        unix_l.set_nonblocking(true).unwrap();
        // A datagram socket on the same name is impossible; datagrams to the stream
        // socket fail, which the sender sees. Stream is what the cases use.
        let abstract_name = format!("{tag}-abstract");
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        let abs_l = UnixListener::bind_addr(&addr).expect("bind abstract");
        abs_l.set_nonblocking(true).unwrap();
        let (tcp, udp, unix, abs) = (
            Arc::new(Received::default()),
            Arc::new(Received::default()),
            Arc::new(Received::default()),
            Arc::new(Received::default()),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let tcp_port = tcp_l.local_addr().unwrap().port();
        let udp_port = udp_s.local_addr().unwrap().port();
        let thread = {
            let (tcp, udp, unix, abs, stop) = (tcp.clone(), udp.clone(), unix.clone(), abs.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut streams: Vec<(Box<dyn Read + Send>, Arc<Received>)> = Vec::new();
                let mut buf = [0u8; 65536];
                loop {
                    let stopping = stop.load(Ordering::SeqCst);
                    if let Ok((s, _)) = tcp_l.accept() {
                        s.set_nonblocking(true).ok();
                        tcp.connections.fetch_add(1, Ordering::SeqCst);
                        streams.push((Box::new(s), tcp.clone()));
                    }
                    for (l, r) in [(&unix_l, &unix), (&abs_l, &abs)] {
                        if let Ok((s, _)) = l.accept() {
                            s.set_nonblocking(true).ok();
                            r.connections.fetch_add(1, Ordering::SeqCst);
                            streams.push((Box::new(s), r.clone()));
                        }
                    }
                    while let Ok((n, _)) = udp_s.recv_from(&mut buf) {
                        udp.connections.fetch_add(1, Ordering::SeqCst);
                        udp.bytes.fetch_add(n as u64, Ordering::SeqCst);
                    }
                    streams.retain_mut(|(s, r)| match s.read(&mut buf) {
                        Ok(0) => false,
                        Ok(n) => {
                            r.bytes.fetch_add(n as u64, Ordering::SeqCst);
                            true
                        }
                        Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
                    });
                    if stopping {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        };
        Listeners { tcp_port, udp_port, unix_path, abstract_name, tcp, udp, unix, abs, stop, thread: Some(thread) }
    }

    /// Stop (after one last look) and remove the socket file.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().ok();
        }
        fs::remove_file(&self.unix_path).ok();
    }

    pub fn get(&self, name: &str) -> &Received {
        match name {
            "tcp" => &self.tcp,
            "udp" => &self.udp,
            "unix" => &self.unix,
            "abstract" => &self.abs,
            _ => panic!("no listener {name}"),
        }
    }
}

impl Drop for Listeners {
    fn drop(&mut self) {
        self.stop();
    }
}

// =======================================================================================
// Fingerprints of host files.
// =======================================================================================

/// Existence, metadata and a checksum of the content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fingerprint {
    Absent,
    File { mode: u32, uid: u32, gid: u32, size: u64, mtime_ns: i128, nlink: u64, sum: u64 },
    Dir { mode: u32, uid: u32, gid: u32 },
    Other { mode: u32 },
}

pub fn fingerprint(path: &Path) -> Fingerprint {
    let Ok(meta) = fs::symlink_metadata(path) else { return Fingerprint::Absent };
    if meta.is_dir() {
        return Fingerprint::Dir { mode: meta.mode(), uid: meta.uid(), gid: meta.gid() };
    }
    if !meta.is_file() {
        return Fingerprint::Other { mode: meta.mode() };
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    if let Ok(bytes) = fs::read(path) {
        bytes.hash(&mut h);
    }
    Fingerprint::File {
        mode: meta.mode(),
        uid: meta.uid(),
        gid: meta.gid(),
        size: meta.len(),
        mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
        nlink: meta.nlink(),
        sum: h.finish(),
    }
}

// =======================================================================================
// Processes.
// =======================================================================================

#[derive(Debug, Clone)]
pub struct ProcInfo {
    pub pid: u32,
    pub ppid: u32,
    pub uids: Vec<u32>,
    pub state: String,
    pub name: String,
    pub exe: Option<PathBuf>,
}

impl ProcInfo {
    pub fn zombie(&self) -> bool {
        self.state.starts_with('Z')
    }
    pub fn describe(&self) -> String {
        format!(
            "pid {} ppid {} {} [{}] uids {:?} exe {:?}",
            self.pid, self.ppid, self.name, self.state, self.uids, self.exe
        )
    }
}

pub fn processes() -> Vec<ProcInfo> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir("/proc") else { return out };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(status) = fs::read_to_string(e.path().join("status")) else { continue };
        let field = |n: &str| status.lines().find_map(|l| l.strip_prefix(n)).unwrap_or_default().trim().to_string();
        let exe = fs::read_link(e.path().join("exe")).ok().map(|p| {
            let s = p.to_string_lossy().into_owned();
            let path = PathBuf::from(s.strip_suffix(" (deleted)").unwrap_or(&s));
            // A chrooted process's exe reads through the chroot directory: name it as
            // the process does (the chroot binds the host's directories at their places).
            container::outside_chroot(&path).unwrap_or(path)
        });
        out.push(ProcInfo {
            pid,
            ppid: field("PPid:").parse().unwrap_or(0),
            uids: field("Uid:").split_whitespace().filter_map(|u| u.parse().ok()).collect(),
            state: field("State:"),
            name: field("Name:"),
            exe,
        });
    }
    out
}

fn environ_contains(pid: u32, needle: &str) -> bool {
    fs::read(format!("/proc/{pid}/environ")).is_ok_and(|e| e.windows(needle.len()).any(|w| w == needle.as_bytes()))
}

/// Processes that belong to one CLI call: forks of its zygote link, or programs started
/// in its workspaces.
fn processes_of(zygote_link: &Path, cli_pid: u32) -> Vec<ProcInfo> {
    let marker = format!("/rsandbox-{cli_pid}-");
    processes()
        .into_iter()
        .filter(|p| {
            p.exe.as_deref() == Some(zygote_link)
                || (p.uids.iter().any(|&u| u >= SANDBOX_UID_BASE || u != 0) && environ_contains(p.pid, &marker))
        })
        .filter(|p| p.pid != std::process::id())
        .collect()
}

/// Wait up to [`LINGER`] for the processes of a finished CLI call to go away; returns
/// the live ones left (zombies already handed to PID 1 only hold a pid and are ignored).
fn lingering(zygote_link: &Path, cli_pid: u32) -> Vec<ProcInfo> {
    let deadline = Instant::now() + LINGER;
    loop {
        let live: Vec<ProcInfo> =
            processes_of(zygote_link, cli_pid).into_iter().filter(|p| !(p.zombie() && p.ppid == 1)).collect();
        if live.is_empty() || Instant::now() >= deadline {
            return live;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// =======================================================================================
// Running a program and collecting everything.
// =======================================================================================

/// What one child process did.
pub struct Output {
    pub pid: u32,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub elapsed: Duration,
    pub killed_by_runner: bool,
}

impl Output {
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    pub fn stderr_str(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// Spawn `command` (its own process group), read everything, kill the group after `limit`.
pub fn run_collect(mut command: Command, limit: Duration) -> Output {
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    command.process_group(0);
    let start = Instant::now();
    let mut child = command.spawn().unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
    let pid = child.id();
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        out_pipe.read_to_end(&mut v).ok();
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        err_pipe.read_to_end(&mut v).ok();
        v
    });
    let mut killed = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > limit && !killed {
            // SAFETY: signalling the process group we created for this child.
            unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = start.elapsed();
    if killed {
        // Pipes may be held by descendants that escaped the group; do not hang on them.
        std::thread::sleep(Duration::from_millis(200));
    }
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    Output { pid, code: status.code(), signal: status.signal(), stdout, stderr, elapsed, killed_by_runner: killed }
}

/// Make `command` run as the attack user (no supplementary groups).
fn as_user(command: &mut Command) {
    let a = attack_user();
    command.uid(a.uid).gid(a.gid);
    let (uid, gid) = (a.uid, a.gid);
    // SAFETY: the hook only calls async-signal-safe getters.
    unsafe {
        command.pre_exec(move || {
            let groups = libc::getgroups(0, std::ptr::null_mut());
            let (mut r, mut e, mut s) = (0, 0, 0);
            libc::getresuid(&mut r, &mut e, &mut s);
            if groups != 0 || [r, e, s] != [uid; 3] {
                return Err(std::io::Error::from_raw_os_error(libc::EPERM));
            }
            let _ = gid;
            Ok(())
        });
    }
}

// =======================================================================================
// One run: the identity, its planted secrets and its victim.
// =======================================================================================

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The CLI as root: each sandbox drops to a uid >= 2000000000.
    Root,
    /// The CLI as `rsandbox-attack`: each sandbox in its own user namespace.
    User,
    /// As `Root`, under a container runtime's default seccomp profile (no namespaces, no
    /// mounts), with `--no-namespaces`.
    ContainerRoot,
    /// As `User`, in the same emulated container.
    ContainerUser,
    /// As `Root`, on a kernel without Landlock (its calls answer ENOSYS), with
    /// `--best-effort`.
    NoLandlockRoot,
    /// As `User`, where user namespaces are refused, with `--no-namespaces`.
    NoUserNamespacesUser,
    /// As `Root`, under the built-in `base` profile (the caller's own R libraries too).
    BaseProfileRoot,
    /// As `Root`, under the built-in `compile` profile (the toolchain may run): only the
    /// cases with `compile-expect`.
    CompileProfileRoot,
    /// As `Root`, in a chroot whose `/` is not a mount point, with `--no-namespaces`.
    ChrootRoot,
    /// As `Root`, inside a real Docker container (Docker's default seccomp profile and
    /// capabilities, `no-new-privileges`), with `--no-namespaces`: the run happens in the
    /// container (`attacks.rs` starts this test binary there).
    DockerRoot,
    /// As `User` (no capabilities), in the same Docker container.
    DockerUser,
    /// Unsandboxed `Rscript` as root in a pid (+net) namespace: does the attack work?
    Calibration,
}

impl Mode {
    pub fn label(self) -> &'static str {
        match self {
            Mode::Root => "root",
            Mode::User => "user",
            Mode::ContainerRoot => "container-root",
            Mode::ContainerUser => "container-user",
            Mode::NoLandlockRoot => "no-landlock-root",
            Mode::NoUserNamespacesUser => "no-userns-user",
            Mode::ChrootRoot => "chroot-root",
            Mode::BaseProfileRoot => "base-profile-root",
            Mode::CompileProfileRoot => "compile-profile-root",
            Mode::DockerRoot => "docker-root",
            Mode::DockerUser => "docker-user",
            Mode::Calibration => "calibration",
        }
    }
    /// The CLI runs as the unprivileged attack user.
    pub fn user(self) -> bool {
        matches!(self, Mode::User | Mode::ContainerUser | Mode::NoUserNamespacesUser | Mode::DockerUser)
    }
    /// The CLI runs without namespaces (`--no-namespaces`): the cases' `container-expect`
    /// and `container-loses` headers (what a namespace-less sandbox cannot hold) apply.
    pub fn container(self) -> bool {
        matches!(
            self,
            Mode::ContainerRoot
                | Mode::ContainerUser
                | Mode::NoUserNamespacesUser
                | Mode::ChrootRoot
                | Mode::DockerRoot
                | Mode::DockerUser
        )
    }
    /// The sandboxes get a private root (they have a mount namespace): every row with
    /// namespaces.
    pub fn private_root(self) -> bool {
        !self.container()
    }
    /// Options the mode adds to every `rsandbox run`.
    pub fn cli_flags(self) -> &'static [&'static str] {
        match self {
            _ if self.container() => &["--no-namespaces"],
            Mode::NoLandlockRoot => &["--best-effort"],
            Mode::BaseProfileRoot => &["--profile", "base"],
            Mode::CompileProfileRoot => &["--profile", "compile"],
            _ => &[],
        }
    }
    /// Put `command` in the mode's environment (after the identity switch).
    fn enter(self, command: &mut Command) {
        match self {
            Mode::ContainerRoot | Mode::ContainerUser => container::in_container_default(command),
            Mode::NoLandlockRoot => container::without_landlock(command),
            Mode::NoUserNamespacesUser => container::without_user_namespaces(command),
            Mode::ChrootRoot => container::in_chroot(command),
            // The container itself is the environment. Its runner (this process) has
            // CAP_SYS_PTRACE added, to read the sandboxes' /proc entries as a host
            // would; the CLI goes without it, with Docker's default capabilities.
            Mode::DockerRoot => {
                // SAFETY: prctl is async-signal-safe and allocates nothing.
                unsafe {
                    command.pre_exec(|| {
                        // CAP_SYS_PTRACE is capability 19 (<linux/capability.h>).
                        if libc::prctl(libc::PR_CAPBSET_DROP, 19, 0, 0, 0) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
            }
            // The identity switch to the attack user cleared every capability.
            Mode::DockerUser => {}
            Mode::Root | Mode::User | Mode::BaseProfileRoot | Mode::CompileProfileRoot | Mode::Calibration => {}
        }
    }
    fn owner(self) -> (u32, u32, PathBuf) {
        match self {
            Mode::User | Mode::ContainerUser | Mode::NoUserNamespacesUser | Mode::DockerUser => {
                let a = attack_user();
                (a.uid, a.gid, PathBuf::from(a.home))
            }
            _ => (0, 0, PathBuf::from("/root")),
        }
    }
}

/// A long-lived sandbox started before the cases: it keeps a secret in its workspace
/// and holds processes, so the cases can go after another tenant.
pub struct Victim {
    child: Child,
    pub cli_pid: u32,
    /// The victim's sandbox process (the R child of its zygote).
    pub pid: u32,
    pub zygote_link: PathBuf,
    /// Paths as the victim sees them (its workspace may be a tmpfs in its own mount
    /// namespace, invisible at the same path from the host).
    pub file: PathBuf,
    pub ws: PathBuf,
    /// The file through /proc/<pid>/root: where the host (root) can reach it.
    pub root_file: PathBuf,
}

pub struct Run {
    pub mode: Mode,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
    pub token: String,
    pub cards: [String; 2],
    /// Every string that must never appear in a sandboxed result.
    pub secrets: Vec<String>,
    /// Planted files: path -> what it was.
    planted: Mutex<BTreeMap<PathBuf, Fingerprint>>,
    planted_content: BTreeMap<PathBuf, (String, u32, u32, u32)>,
    created_dirs: Vec<PathBuf>,
    pub ssh_key: PathBuf,
    pub run_dir: PathBuf,
    pub tag: String,
    pub victim: Option<Victim>,
    pub resolv: PathBuf,
    rtmp_before: BTreeSet<PathBuf>,
}

pub const HOME_SECRET: &str = "rsandbox-attack-secret.txt";
pub const ETC_SECRET: &str = "/etc/rsandbox-attack-secret";
/// /dev/shm is shared with every process of the host (a chroot's too): named per test
/// process, so that two corpus runs on one machine do not overwrite each other's secret.
pub fn shm_secret() -> String {
    format!("/dev/shm/rsandbox-attack-secret-{}", std::process::id())
}
pub const TMP_SECRET: &str = "/tmp/rsandbox-attack-secret";

fn rtmp_dirs_of(uid: u32) -> BTreeSet<PathBuf> {
    fs::read_dir("/tmp")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("Rtmp"))
                .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

impl Drop for Victim {
    /// A run that panicked must not leave its victim sleeping for an hour.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(self.cli_pid as i32, libc::SIGKILL) };
            self.child.wait().ok();
        }
        for d in engine_dirs_of(self.cli_pid) {
            make_removable(&d);
            fs::remove_dir_all(&d).ok();
        }
    }
}

impl Drop for Run {
    /// Remove everything planted (also when the run panicked half-way).
    fn drop(&mut self) {
        self.victim.take();
        for p in self.planted_content.keys() {
            fs::remove_file(p).ok();
        }
        for d in self.created_dirs.iter().rev() {
            fs::remove_dir(d).ok();
        }
        make_removable(&self.run_dir);
        fs::remove_dir_all(&self.run_dir).ok();
    }
}

impl Run {
    pub fn start(mode: Mode) -> Run {
        let s = setup();
        let (uid, gid, home) = mode.owner();
        let token = format!("RSANDBOX-SECRET-{}", random_hex(12));
        let card = || {
            let d = format!("4{}", random_digits(15));
            format!("{}-{}-{}-{}", &d[0..4], &d[4..8], &d[8..12], &d[12..16])
        };
        let cards = [card(), card()];
        let tag = random_hex(3);
        let run_dir = PathBuf::from(format!("/tmp/rsandbox-attack-run-{}-{}", std::process::id(), tag));
        fs::create_dir(&run_dir).expect("create the run dir");
        fs::set_permissions(&run_dir, fs::Permissions::from_mode(0o755)).unwrap();

        let mut created_dirs = Vec::new();
        let mut ensure_dir = |dir: &Path, mode_bits: u32| {
            if !dir.exists() {
                fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
                fs::set_permissions(dir, fs::Permissions::from_mode(mode_bits)).unwrap();
                std::os::unix::fs::chown(dir, Some(uid), Some(gid)).unwrap();
                created_dirs.push(dir.to_path_buf());
            }
        };
        ensure_dir(&home.join(".ssh"), 0o700);
        ensure_dir(&home.join("Documents"), 0o755);
        // Never overwrite a real key: plant beside it then.
        let mut ssh_key = home.join(".ssh/id_rsa");
        if ssh_key.exists() && !fs::read_to_string(&ssh_key).is_ok_and(|t| t.contains("rsandbox attack corpus")) {
            ssh_key = home.join(".ssh/id_rsa_rsandbox_attack");
            println!(
                "note: {} exists and is not ours; the key is planted at {}",
                home.join(".ssh/id_rsa").display(),
                ssh_key.display()
            );
        }
        let mut planted_content = BTreeMap::new();
        let key = format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n# planted by the rsandbox attack corpus\n{token}\n-----END OPENSSH PRIVATE KEY-----\n"
        );
        planted_content.insert(home.join(HOME_SECRET), (format!("api_key = {token}\n"), 0o644, uid, gid));
        planted_content.insert(ssh_key.clone(), (key, 0o644, uid, gid));
        planted_content.insert(
            home.join("Documents/cards.txt"),
            (format!("Visa: {}\nMastercard: {}\nnote: {token}\n", cards[0], cards[1]), 0o644, uid, gid),
        );
        for p in [ETC_SECRET.to_string(), shm_secret(), TMP_SECRET.to_string()] {
            planted_content.insert(PathBuf::from(p), (format!("password = {token}\n"), 0o644, 0, 0));
        }
        for (path, (text, mode_bits, u, g)) in &planted_content {
            write_owned(path, text.as_bytes(), *mode_bits, *u, *g);
        }
        let resolv = run_dir.join("resolv.conf");
        fs::write(&resolv, "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n").unwrap();

        let rtmp_before = if mode.user() { rtmp_dirs_of(uid) } else { BTreeSet::new() };
        let mut run = Run {
            mode,
            uid,
            gid,
            home,
            token: token.clone(),
            cards: cards.clone(),
            // The random part alone too: a deparse may print the token as `RSANDBOX - SECRET - ...`.
            secrets: vec![
                token.clone(),
                token.trim_start_matches("RSANDBOX-SECRET-").to_string(),
                cards[0].clone(),
                cards[1].clone(),
                cards[0].replace('-', ""),
                cards[1].replace('-', ""),
            ],
            planted: Mutex::new(BTreeMap::new()),
            planted_content,
            created_dirs,
            ssh_key,
            run_dir,
            tag,
            victim: None,
            resolv,
            rtmp_before,
        };
        run.victim = Some(run.start_victim(s));
        // The victim's zygote made its R temp dir before this snapshot... and its file
        // is planted now too.
        if mode.user() {
            run.rtmp_before = rtmp_dirs_of(uid);
        }
        let mut planted = BTreeMap::new();
        for p in run.planted_content.keys() {
            planted.insert(p.clone(), fingerprint(p));
        }
        let v = run.victim.as_ref().unwrap();
        planted.insert(v.root_file.clone(), fingerprint(&v.root_file));
        *run.planted.lock().unwrap() = planted;
        run
    }

    fn cli_command(&self, s: &Setup, zygote_link: &Path) -> Command {
        let mut c = Command::new(&s.cli);
        c.env_clear()
            .current_dir("/")
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("LANG", "C.UTF-8")
            .env("HOME", &self.home)
            .env("USER", if self.mode.user() { ATTACK_USER } else { "root" })
            .env("RSANDBOX_ATTACK_TOKEN", &self.token)
            .env("AWS_SECRET_ACCESS_KEY", &self.token)
            .env("RSANDBOX_ZYGOTE", zygote_link)
            // Every case must leave nothing running, so no per-user daemon.
            .env("RSANDBOX_NO_DAEMON", "1");
        if self.mode.user() {
            as_user(&mut c);
        }
        self.mode.enter(&mut c);
        c
    }

    fn start_victim(&self, s: &Setup) -> Victim {
        let dir = self.run_dir.join("victim");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&dir, Some(self.uid), Some(self.gid)).unwrap();
        let zygote_link = dir.join("rsandbox-zygote");
        fs::hard_link(&s.zygote, &zygote_link).expect("link the victim's zygote");
        let code = format!(
            "writeLines(\"victim-secret: {}\", \"victim-secret.txt\")\n\
             for (i in seq_len({VICTIM_SLEEPERS})) parallel::mcparallel(Sys.sleep(3600))\n\
             writeLines(\"ready\", \"victim-ready.txt\")\n\
             Sys.sleep(3600)\n",
            self.token
        );
        let file = dir.join("victim.R");
        write_owned(&file, code.as_bytes(), 0o600, self.uid, self.gid);
        // The victim runs as the identity of the run (root for the calibration too).
        let mut c = self.cli_command(s, &zygote_link);
        if self.mode == Mode::Calibration {
            c.env("USER", "root");
        }
        c.args(["run", "--json", "--timeout", "3600"]).args(self.mode.cli_flags()).arg(&file);
        // Its stderr is kept (in the run's directory, out of the sandbox's reach) so that
        // a victim that never gets ready says why.
        let stderr_path = self.run_dir.join("victim-stderr.txt");
        let stderr = fs::File::create(&stderr_path).expect("create the victim's stderr file");
        c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
        c.process_group(0);
        let mut child = c.spawn().expect("start the victim sandbox");
        let cli_pid = child.id();
        // Generous: the victim starts while other rows of the corpus load both cores
        // (one CI run took over 30 s here).
        let started = Instant::now();
        let deadline = started + Duration::from_secs(120);
        loop {
            let procs = processes();
            let zygote = procs.iter().find(|p| p.ppid == cli_pid && p.exe.as_deref() == Some(zygote_link.as_path()));
            let sandbox = zygote.and_then(|z| {
                procs.iter().find(|p| p.ppid == z.pid && p.exe.as_deref() == Some(zygote_link.as_path()))
            });
            let victim_engine = engine_dirs_of(cli_pid).into_iter().find(|engine| engine.join("ws-1").exists());
            if let (Some(sandbox), Some(engine)) = (sandbox, victim_engine) {
                let ws = engine.join("ws-1");
                let through_root = |p: &Path| PathBuf::from(format!("/proc/{}/root{}", sandbox.pid, p.display()));
                // Without a private root the workspace is at its own path; reading it
                // through /proc/<pid>/root needs CAP_SYS_PTRACE, which a container's
                // root (the Docker rows' runner) lacks.
                let ready = ws.join("victim-ready.txt");
                let ready = if self.mode.private_root() { through_root(&ready) } else { ready };
                if ready.exists() {
                    let file = ws.join("victim-secret.txt");
                    let root_file = through_root(&file);
                    return Victim { child, cli_pid, pid: sandbox.pid, zygote_link, file, ws, root_file };
                }
            }
            let exited = child.try_wait().ok().flatten();
            if Instant::now() >= deadline || exited.is_some() {
                child.kill().ok();
                let how = match exited {
                    Some(status) => format!("exited ({status})"),
                    None => "still running".into(),
                };
                let ours: Vec<String> = procs
                    .iter()
                    .filter(|p| p.exe.as_deref() == Some(zygote_link.as_path()))
                    .map(ProcInfo::describe)
                    .collect();
                // Where the ready file was looked for, and what is there: the sleepers can
                // all be up with no ready file seen (one CI run under load).
                let names = |dir: &Path| -> std::io::Result<Vec<String>> {
                    Ok(fs::read_dir(dir)?
                        .filter_map(Result::ok)
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect())
                };
                let looked: Vec<String> = engine_dirs_of(cli_pid)
                    .into_iter()
                    .map(|engine| {
                        format!("{}: {:?}, ws-1: {:?}", engine.display(), names(&engine), names(&engine.join("ws-1")))
                    })
                    .collect();
                panic!(
                    "the victim sandbox did not get ready within {:.0?}: the CLI {how}; its zygote processes {ours:?}; \
                     its stderr: {:?}; engine directories {looked:?}",
                    started.elapsed(),
                    fs::read_to_string(&stderr_path).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Live processes of the victim (its zygote, its sandbox and the sleepers).
    pub fn victim_processes(&self) -> usize {
        let v = self.victim.as_ref().unwrap();
        processes().iter().filter(|p| p.exe.as_deref() == Some(v.zygote_link.as_path()) && !p.zombie()).count()
    }

    /// Compare the planted files with their fingerprints; restore those that changed.
    pub fn check_planted(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut planted = self.planted.lock().unwrap();
        for (path, before) in planted.iter_mut() {
            let now = fingerprint(path);
            if &now != before {
                problems.push(format!("planted file {} changed: {before:?} -> {now:?}", path.display()));
                if let Some((text, mode_bits, u, g)) = self.planted_content.get(path) {
                    write_owned(path, text.as_bytes(), *mode_bits, *u, *g);
                }
                *before = fingerprint(path);
            }
        }
        problems
    }

    /// End the run: checks that need the whole run, then remove everything planted.
    pub fn finish(mut self) -> Vec<String> {
        let mut problems = self.check_planted();
        let s = setup();
        if let Some(v) = &self.victim {
            self.planted.lock().unwrap().remove(&v.root_file);
        }
        if let Some(mut v) = self.victim.take() {
            // Its zygote, its sandbox and the sleepers the sandbox forked.
            let expected = 2 + VICTIM_SLEEPERS;
            let alive = {
                let vref = &v;
                processes()
                    .iter()
                    .filter(|p| p.exe.as_deref() == Some(vref.zygote_link.as_path()) && !p.zombie())
                    .count()
            };
            if v.child.try_wait().ok().flatten().is_some() {
                problems.push("the victim sandbox's CLI died during the run (a case killed another tenant)".into());
            } else if alive < expected {
                problems.push(format!(
                    "the victim sandbox lost processes during the run: {alive} alive, expected {expected} \
                     (a case signalled another tenant)"
                ));
            }
            // SIGKILL the supervisor: its zygote must notice and take every sandbox
            // process with it.
            // SAFETY: signalling our own child.
            unsafe { libc::kill(v.cli_pid as i32, libc::SIGKILL) };
            v.child.wait().ok();
            let left = lingering(&v.zygote_link, v.cli_pid);
            let left = if left.is_empty() {
                left
            } else {
                std::thread::sleep(Duration::from_secs(1));
                lingering(&v.zygote_link, v.cli_pid)
            };
            if !left.is_empty() {
                problems.push(format!(
                    "after SIGKILL of the victim's supervisor, {} sandbox process(es) outlived it: {:?}",
                    left.len(),
                    left.iter().map(ProcInfo::describe).collect::<Vec<_>>()
                ));
                for p in &left {
                    // SAFETY: killing leftovers of our own victim.
                    unsafe { libc::kill(p.pid as i32, libc::SIGKILL) };
                }
            }
            drop(v);
        }
        // Leftovers of any case of this run.
        let run_dir = self.run_dir.clone();
        let bin_dir = s.dir.clone();
        let strays: Vec<ProcInfo> = processes()
            .into_iter()
            .filter(|p| !(p.zombie() && p.ppid == 1))
            .filter(|p| match self.mode {
                Mode::Root
                | Mode::ContainerRoot
                | Mode::NoLandlockRoot
                | Mode::ChrootRoot
                | Mode::BaseProfileRoot
                | Mode::CompileProfileRoot
                | Mode::DockerRoot => {
                    p.uids.iter().any(|&u| u >= SANDBOX_UID_BASE)
                        && p.exe.as_deref().is_some_and(|e| e.starts_with(&run_dir) || e.starts_with(&bin_dir))
                }
                Mode::User | Mode::ContainerUser | Mode::NoUserNamespacesUser | Mode::DockerUser => {
                    p.uids.contains(&self.uid)
                }
                Mode::Calibration => false,
            })
            .collect();
        if !strays.is_empty() {
            problems.push(format!(
                "{} sandbox process(es) of this run still alive at its end: {:?}",
                strays.len(),
                strays.iter().map(ProcInfo::describe).collect::<Vec<_>>()
            ));
            for p in &strays {
                // SAFETY: killing leftovers of our own run.
                unsafe { libc::kill(p.pid as i32, libc::SIGKILL) };
            }
        }
        if self.mode.user() {
            let after = rtmp_dirs_of(self.uid);
            let new: Vec<&PathBuf> = after.difference(&self.rtmp_before).collect();
            if !new.is_empty() {
                problems.push(format!(
                    "temp dir leak: {} R temp dir(s) /tmp/Rtmp* owned by {ATTACK_USER} appeared during the run and were not \
                     removed (e.g. {}); the zygote's R session temp dir survives every CLI call",
                    new.len(),
                    new[0].display()
                ));
                for d in new {
                    fs::remove_dir_all(d).ok();
                }
            }
        }
        problems.extend(self.check_planted());
        problems
    }
}

fn write_owned(path: &Path, bytes: &[u8], mode_bits: u32, uid: u32, gid: u32) {
    fs::remove_file(path).ok();
    fs::write(path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    fs::set_permissions(path, fs::Permissions::from_mode(mode_bits)).unwrap();
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
}

// =======================================================================================
// One case.
// =======================================================================================

/// Per-case host resources: listeners, target files, a sleeper process.
struct CaseHost {
    idx: usize,
    stem: String,
    listeners: Listeners,
    dns_label: String,
    targets: BTreeMap<&'static str, PathBuf>,
    before: BTreeMap<PathBuf, Fingerprint>,
    sleeper: Option<Child>,
    sleeper_before: String,
    placeholders: HashMap<&'static str, String>,
    /// `lock:r-library`: the open file through which the runner holds a write lock on a
    /// file of R's library for the whole case (closing it releases the lock).
    _host_lock: Option<fs::File>,
}

/// A file of R's own library every sandbox may read: `R RHOME`/library/base/DESCRIPTION.
fn r_library_file() -> PathBuf {
    let out = Command::new("R").arg("RHOME").output().expect("run R RHOME");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("library/base/DESCRIPTION")
}

/// Hold a write lock (open file description lock, whole file) on `path` until the
/// returned file is closed, as a host program updating the file would. A read lock a
/// sandbox takes on the same inode conflicts with it (`EAGAIN`), exactly as the host
/// writer would conflict with the sandbox's lock.
fn hold_write_lock(path: &Path) -> fs::File {
    let file = fs::OpenOptions::new().read(true).write(true).open(path).expect("open the file to lock");
    let mut lock = libc::flock { l_type: libc::F_WRLCK as i16, l_whence: 0, l_start: 0, l_len: 0, l_pid: 0 };
    // SAFETY: a valid fd and flock for the duration of the call.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLKW, &mut lock) };
    assert_eq!(rc, 0, "lock {}: {}", path.display(), std::io::Error::last_os_error());
    file
}

/// What another process of the host looks like from outside: alive, nice value, CPUs,
/// resource limits. A sandbox must change none of it.
fn process_state(pid: u32) -> String {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which is in parentheses): state is the first,
    // nice the 17th.
    let after = stat.rsplit_once(')').map(|(_, a)| a).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let state = fields.first().copied().unwrap_or("gone");
    if state == "Z" || state == "X" || state == "gone" {
        return "dead".into();
    }
    let nice = fields.get(16).copied().unwrap_or("?");
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let cpus = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap_or("?").trim().to_string();
    let limits = fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
    let limits: Vec<String> =
        limits.lines().skip(1).map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
    format!("alive nice={nice} cpus={cpus} limits=[{}]", limits.join("; "))
}

const TARGET_FILES: [(&str, &str); 10] = [
    ("file:home-target", "TARGET_HOME"),
    ("file:tmp-target", "TARGET_TMP"),
    ("file:ssh-target", "TARGET_SSH"),
    ("file:new-home", "NEW_HOME"),
    ("file:new-tmp", "NEW_TMP"),
    ("file:new-shm", "NEW_SHM"),
    ("file:new-etc", "NEW_ETC"),
    ("file:new-var-tmp", "NEW_VAR_TMP"),
    ("file:site-library", "NEW_SITE_LIBRARY"),
    ("file:r-profile-site", "RPROFILE_SITE"),
];

impl CaseHost {
    fn new(run: &Run, case: &Case, idx: usize, zygote_link: &Path) -> CaseHost {
        let s = setup();
        let stem = format!("rsandbox-attack-{}-c{idx:03}", run.tag);
        let listeners = Listeners::start(&stem);
        let dns_label = format!("rsbx{}c{idx:03}", run.tag);
        let home = run.home.clone();
        let mut targets: BTreeMap<&'static str, PathBuf> = BTreeMap::new();
        for (target, ph) in TARGET_FILES {
            let path = match ph {
                "TARGET_HOME" => home.join(format!("{stem}-target.txt")),
                "TARGET_TMP" => PathBuf::from(format!("/tmp/{stem}-target.txt")),
                "TARGET_SSH" => home.join(format!(".ssh/{stem}-target")),
                "NEW_HOME" => home.join(format!("{stem}-new")),
                "NEW_TMP" => PathBuf::from(format!("/tmp/{stem}-new")),
                "NEW_SHM" => PathBuf::from(format!("/dev/shm/{stem}-new")),
                "NEW_ETC" => PathBuf::from(format!("/etc/{stem}-new")),
                "NEW_VAR_TMP" => PathBuf::from(format!("/var/tmp/{stem}-new")),
                "NEW_SITE_LIBRARY" => {
                    PathBuf::from(format!("/usr/local/lib/R/site-library/rsandboxattack{}c{idx:03}", run.tag))
                }
                "RPROFILE_SITE" => PathBuf::from("/usr/lib/R/etc/Rprofile.site"),
                _ => unreachable!(),
            };
            if case.targets.contains(target) {
                if ph.starts_with("TARGET_") {
                    let mode_bits = if ph == "TARGET_SSH" { 0o600 } else { 0o644 };
                    write_owned(
                        &path,
                        format!("original content of target {idx}\n").as_bytes(),
                        mode_bits,
                        run.uid,
                        run.gid,
                    );
                }
                targets.insert(ph, path);
            }
        }
        if case.targets.contains("file:zygote") {
            targets.insert("ZYGOTE_PATH", zygote_link.to_path_buf());
        }
        let sleeper = case.targets.contains("proc:sleeper").then(|| {
            let mut c = Command::new("/bin/sleep");
            c.arg("600").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).process_group(0);
            if run.mode.user() {
                as_user(&mut c);
            }
            c.spawn().expect("start the sleeper")
        });
        let before = targets.values().map(|p| (p.clone(), fingerprint(p))).collect();
        // Let the sleeper reach its sleep before taking its picture.
        let sleeper_before = sleeper
            .as_ref()
            .map(|c| {
                std::thread::sleep(Duration::from_millis(20));
                process_state(c.id())
            })
            .unwrap_or_default();

        let v = run.victim.as_ref().unwrap();
        let mut ph: HashMap<&'static str, String> = HashMap::new();
        let show = |p: &Path| p.to_string_lossy().into_owned();
        ph.insert("HOME", show(&run.home));
        // A fresh directory of the identity's for `--output`; checked after the run.
        let output_dir = PathBuf::from(format!("/tmp/{stem}-output"));
        if case.placeholders.contains("OUTPUT_DIR") {
            fs::create_dir(&output_dir).expect("create the output dir");
            std::os::unix::fs::chown(&output_dir, Some(run.uid), Some(run.gid)).expect("chown the output dir");
        }
        ph.insert("OUTPUT_DIR", show(&output_dir));
        ph.insert("PROBE_HEX", s.probe_hex.clone());
        ph.insert("CASE_ID", stem.clone());
        ph.insert("TOKEN_FILE_HOME", show(&run.home.join(HOME_SECRET)));
        ph.insert("SSH_KEY", show(&run.ssh_key));
        ph.insert("DOCUMENTS", show(&run.home.join("Documents")));
        ph.insert("CARDS_FILE", show(&run.home.join("Documents/cards.txt")));
        ph.insert("CARD_1", run.cards[0].clone());
        ph.insert("CARD_2", run.cards[1].clone());
        ph.insert("ETC_SECRET", ETC_SECRET.into());
        ph.insert("SHM_SECRET", shm_secret());
        ph.insert("TMP_SECRET", TMP_SECRET.into());
        ph.insert("VICTIM_FILE", show(&v.file));
        ph.insert("VICTIM_WS", show(&v.ws));
        ph.insert("VICTIM_ROOT_FILE", show(&v.root_file));
        ph.insert("VICTIM_PID", v.pid.to_string());
        ph.insert("TCP_PORT", listeners.tcp_port.to_string());
        ph.insert("UDP_PORT", listeners.udp_port.to_string());
        ph.insert("UNIX_PATH", show(&listeners.unix_path));
        ph.insert("ABSTRACT_NAME", listeners.abstract_name.clone());
        ph.insert("DNS_NAME", format!("{dns_label}.rsandbox-attack.test"));
        if matches!(run.mode, Mode::DockerRoot | Mode::DockerUser) {
            // No test host in a container (see `run_sandboxed`): the cases are refused.
            ph.insert("CRAN_HOST", cran::CRAN_HOST.to_string());
            ph.insert("CRAN_CA", "/nonexistent-ca.pem".to_string());
        } else if let Some(cran) = case.targets.contains("host:cran").then(cran_server).flatten() {
            ph.insert("CRAN_HOST", cran::CRAN_HOST.to_string());
            ph.insert("CRAN_CA", show(&cran.ca));
        }
        for (k, p) in &targets {
            ph.insert(k, show(p));
        }
        if let Some(sl) = &sleeper {
            ph.insert("SLEEPER_PID", sl.id().to_string());
        }
        let host_lock = case.targets.contains("lock:r-library").then(|| {
            let path = r_library_file();
            ph.insert("LOCKED_R_FILE", show(&path));
            hold_write_lock(&path)
        });
        CaseHost {
            idx,
            stem,
            listeners,
            dns_label,
            targets,
            before,
            sleeper,
            sleeper_before,
            placeholders: ph,
            _host_lock: host_lock,
        }
    }

    fn substitute(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find("}}").expect("validated at parse time");
            let name = &after[..end];
            match self.placeholders.get(name) {
                Some(v) => out.push_str(v),
                None => panic!("placeholder {{{{{name}}}}} has no value in this case (is its target listed?)"),
            }
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        out
    }

    /// Changed target files (path, before, after).
    fn changed_targets(&self) -> Vec<(String, Fingerprint, Fingerprint)> {
        let mut changed = Vec::new();
        // The runner itself links and unlinks the zygote binary for the cases running
        // beside this one, so its link count is not this case's doing.
        let ignore_links = |f: Fingerprint| match f {
            Fingerprint::File { mode, uid, gid, size, mtime_ns, sum, .. } => {
                Fingerprint::File { mode, uid, gid, size, mtime_ns, nlink: 0, sum }
            }
            other => other,
        };
        for (ph, path) in &self.targets {
            let (mut now, mut before) = (fingerprint(path), self.before[path].clone());
            if *ph == "ZYGOTE_PATH" {
                (now, before) = (ignore_links(now), ignore_links(before));
            }
            if now != before {
                let target = TARGET_FILES.iter().find(|(_, p)| p == ph).map(|(t, _)| *t).unwrap_or("file:zygote");
                changed.push((target.to_string(), before.clone(), now));
            }
        }
        changed
    }

    /// The sleeper's state, when it changed.
    fn sleeper_changed(&self) -> Option<String> {
        let pid = self.sleeper.as_ref()?.id();
        let now = process_state(pid);
        if now == self.sleeper_before {
            return None;
        }
        // Name only what differs.
        let before = self.sleeper_before.split("limits=").collect::<Vec<_>>();
        let after = now.split("limits=").collect::<Vec<_>>();
        let mut diffs = Vec::new();
        if before[0] != after[0] {
            diffs.push(format!("{} -> {}", before[0].trim(), after[0].trim()));
        }
        if let (Some(b), Some(a)) = (before.get(1), after.get(1)) {
            for (x, y) in b.split("; ").zip(a.split("; ")) {
                if x != y {
                    diffs.push(format!("limit {x:?} -> {y:?}"));
                }
            }
        }
        Some(diffs.join(", "))
    }

    fn listener_counts(&self, dns: &DnsListener) -> BTreeMap<&'static str, (u64, u64)> {
        let mut m = BTreeMap::new();
        for name in ["tcp", "udp", "unix", "abstract"] {
            let r = self.listeners.get(name);
            m.insert(name, (r.connections.load(Ordering::SeqCst), r.bytes.load(Ordering::SeqCst)));
        }
        m.insert("dns", (dns.packets_with(&self.dns_label) as u64, 0));
        m
    }

    /// Remove everything this case created (restores shared files it changed).
    fn cleanup(&mut self, run: &Run) {
        self.listeners.stop();
        fs::remove_dir_all(format!("/tmp/{}-output", self.stem)).ok();
        if let Some(mut sl) = self.sleeper.take() {
            sl.kill().ok();
            sl.wait().ok();
        }
        for (ph, path) in &self.targets {
            match *ph {
                "RPROFILE_SITE" | "ZYGOTE_PATH" => {
                    if fingerprint(path) != self.before[path] {
                        println!(
                            "WARNING: {} changed during case {}; it cannot be restored automatically",
                            path.display(),
                            self.idx
                        );
                    }
                }
                _ => {
                    let dir = path.parent().unwrap();
                    let name = path.file_name().unwrap().to_string_lossy().into_owned();
                    let prefix = if *ph == "NEW_SITE_LIBRARY" { name.clone() } else { self.stem.clone() };
                    if let Ok(entries) = fs::read_dir(dir) {
                        for e in entries.flatten() {
                            if e.file_name().to_string_lossy().starts_with(&prefix) {
                                make_removable(&e.path());
                                fs::remove_dir_all(e.path()).or_else(|_| fs::remove_file(e.path())).ok();
                            }
                        }
                    }
                }
            }
        }
        let _ = run;
    }
}

/// The verdict on one case.
pub struct Report {
    pub name: String,
    pub expected: String,
    pub got: String,
    pub exit: String,
    pub seconds: f64,
    pub bound: f64,
    pub failures: Vec<String>,
    pub note: Option<String>,
}

/// What `--output` wrote: regular files and directories only (nothing the sandbox
/// linked or made special), and no secret in any of them.
fn check_output_dir(run: &Run, dir: &Path) -> Vec<String> {
    let variants: Vec<(String, Vec<Vec<u8>>)> = run.secrets.iter().map(|s| (s.clone(), secret_variants(s))).collect();
    let mut problems = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            problems.push(format!("--output dir {} cannot be listed", d.display()));
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let meta = fs::symlink_metadata(&path).expect("stat an output entry");
            if meta.is_dir() {
                stack.push(path);
            } else if !meta.is_file() {
                problems.push(format!("--output wrote a non-regular file {} ({:?})", path.display(), meta.file_type()));
            } else {
                let bytes = fs::read(&path).unwrap_or_default();
                for (secret, vs) in &variants {
                    if vs.iter().any(|v| contains_bytes(&bytes, v)) {
                        problems.push(format!("secret {secret} found in --output file {}", path.display()));
                    }
                }
            }
        }
    }
    problems
}

/// Variants of a secret an attacker might print to slip past a plain search.
fn secret_variants(secret: &str) -> Vec<Vec<u8>> {
    let b = secret.as_bytes();
    let mut v = vec![b.to_vec(), b.iter().rev().copied().collect()];
    v.push(b.iter().map(|c| format!("{c:02x}")).collect::<String>().into_bytes());
    v.push(b.iter().map(|c| format!("{c:02X}")).collect::<String>().into_bytes());
    for off in 0..3 {
        let enc = base64::engine::general_purpose::STANDARD.encode(&b[off..]);
        // Drop the last 4 characters: they depend on what follows the secret.
        if enc.len() > 8 {
            v.push(enc.as_bytes()[..enc.len() - 4].to_vec());
        }
    }
    v
}

fn contains_bytes(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Every place in the output where a secret (or a variant of it) shows up.
fn find_secrets(run: &Run, out: &Output, json: Option<&Value>) -> Vec<String> {
    let variants: Vec<(String, Vec<Vec<u8>>)> = run.secrets.iter().map(|s| (s.clone(), secret_variants(s))).collect();
    let mut found = Vec::new();
    let mut look = |where_: &str, bytes: &[u8]| {
        for (s, vs) in &variants {
            if vs.iter().any(|v| contains_bytes(bytes, v)) {
                found.push(format!("secret {s} found in {where_}"));
            }
        }
    };
    look("the CLI's stdout", &out.stdout);
    look("the CLI's stderr", &out.stderr);
    fn walk(v: &Value, path: &str, look: &mut dyn FnMut(&str, &[u8])) {
        match v {
            Value::String(s) => {
                look(path, s.as_bytes());
                let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
                if compact.len() >= 8
                    && compact.len().is_multiple_of(4)
                    && compact.chars().all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '=')
                {
                    if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(compact.as_bytes()) {
                        look(&format!("{path} (base64-decoded)"), &bytes);
                        // PNG text chunks may be zlib-compressed; raw bytes are searched
                        // above, which covers tEXt and the uncompressed IDAT of tiny images.
                    }
                }
            }
            Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| walk(x, &format!("{path}[{i}]"), look)),
            Value::Object(o) => o.iter().for_each(|(k, x)| walk(x, &format!("{path}.{k}"), look)),
            _ => {}
        }
    }
    if let Some(j) = json {
        walk(j, "result", &mut look);
    }
    found.sort();
    found.dedup();
    found
}

/// JSON equality with a relative tolerance for numbers.
pub fn json_close(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs())
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_close(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_close(v, w)))
        }
        _ => a == b,
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…[{} bytes]", &s[..cut], s.len())
}

/// A dir for one case's files: 0755, root-owned, inside the run dir.
fn case_dir(run: &Run, idx: usize) -> PathBuf {
    let d = run.run_dir.join(format!("c{idx:03}"));
    fs::create_dir(&d).unwrap();
    fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// Run one case through the sandbox and check everything.
pub fn run_sandboxed(run: &Run, case: &Case, idx: usize) -> Report {
    let s = setup();
    let dir = case_dir(run, idx);
    let zygote_link = dir.join("rsandbox-zygote");
    fs::hard_link(&s.zygote, &zygote_link).expect("link the zygote");
    let mut host = CaseHost::new(run, case, idx, &zygote_link);
    let code = host.substitute(&case.source);
    let file = dir.join("case.R");
    fs::write(&file, &code).unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
    let subst = |v: &Vec<String>| v.iter().map(|x| host.substitute(x)).collect::<Vec<_>>();

    let mut flags: Vec<String> = run.mode.cli_flags().iter().map(|f| f.to_string()).collect();
    if let Some(functions) = &case.functions {
        // The allowlist in a profile file that extends the mode's profile (in its place).
        let extends = match flags.iter().position(|f| f == "--profile") {
            Some(i) => flags.drain(i..i + 2).nth(1).unwrap_or_default(),
            None => "strict".to_string(),
        };
        let listed: Vec<String> = functions.iter().map(|f| format!("{f:?}")).collect();
        let profile = dir.join("functions.toml");
        fs::write(&profile, format!("extends = {extends:?}\nfunctions = [{}]\n", listed.join(", "))).unwrap();
        fs::set_permissions(&profile, fs::Permissions::from_mode(0o644)).unwrap();
        flags.extend(["--profile".to_string(), profile.to_string_lossy().into_owned()]);
    }
    if let Some(allow) = &case.network {
        // The allowlist in a profile file that extends the mode's profile (in its place).
        let extends = match flags.iter().position(|f| f == "--profile") {
            Some(i) => flags.drain(i..i + 2).nth(1).unwrap_or_default(),
            None => "strict".to_string(),
        };
        let profile = if matches!(run.mode, Mode::DockerRoot | Mode::DockerUser) {
            // In a Docker container no test host can be made (no network namespaces), and
            // none is needed: without namespaces a network profile is refused before the
            // case runs. The same allowlist, in a profile of its own.
            let allow: Vec<String> = allow.iter().map(|a| format!("{a:?}")).collect();
            let text = format!("extends = {extends:?}\n\n[network]\nallow = [{}]\n{NETWORK_CAPS}", allow.join(", "));
            let path = dir.join("network.toml");
            fs::write(&path, text).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
            path
        } else {
            let cran = cran_server().expect("network cases need the test host (root)");
            let hosts: Vec<(&str, &str)> = NETWORK_HOSTS.to_vec();
            cran.profile(
                &format!("attack-{idx}"),
                &extends,
                &allow.iter().map(String::as_str).collect::<Vec<_>>(),
                &hosts,
                NETWORK_CAPS,
            )
        };
        flags.extend(["--profile".to_string(), profile.to_string_lossy().into_owned()]);
    }
    let mut cmd = run.cli_command(s, &zygote_link);
    cmd.arg("run").arg(&file).arg("--json").args(&flags).args(case.args.iter().map(|a| host.substitute(a)));
    let dirs_before = all_engine_dirs();
    let out = run_collect(cmd, CALL_LIMIT);

    let mut failures = Vec::new();
    let bound = case.timeout() + TIME_SLACK;
    let secs = out.elapsed.as_secs_f64();
    let stdout = out.stdout_str();
    let json: Option<Value> = serde_json::from_str::<Value>(stdout.trim()).ok().filter(Value::is_object);
    let got;
    if out.killed_by_runner {
        failures.push(format!("the CLI did not finish within {CALL_LIMIT:?}; the runner killed it"));
    }
    let refused_expected = case.outcomes.iter().any(|o| o == REFUSED);
    let without_namespaces = flags.iter().any(|f| f == "--no-namespaces");
    match &json {
        // A network case where sandboxes get no network namespace: refused before any
        // sandbox starts (never run with the host's network).
        None if case.network.is_some() && without_namespaces && out.code == Some(2) => {
            got = "refused (no network namespace)".to_string();
            let stderr = out.stderr_str();
            if !stderr.contains("the network allowlist needs a network namespace") {
                failures.push(format!("exit 2 without the network refusal: {:?}", clip(&stderr, 400)));
            }
        }
        // Refused before it ran: no result, bad input, the function named on stderr.
        None if refused_expected && out.code == Some(2) => {
            got = REFUSED.to_string();
            let stderr = out.stderr_str();
            if !stderr.contains("is not in the profile's function allowlist") {
                failures.push(format!("exit 2 without the allowlist's refusal: {:?}", clip(&stderr, 400)));
            }
            for c in subst(&case.error_contains) {
                if !stderr.contains(&c) {
                    failures.push(format!("the refusal {:?} lacks {c:?}", clip(&stderr, 400)));
                }
            }
            if !stdout.trim().is_empty() {
                failures.push(format!("stdout is not empty: {:?}", clip(&stdout, 300)));
            }
        }
        None => {
            got = format!("no JSON (exit {:?} signal {:?})", out.code, out.signal);
            failures.push(format!(
                "stdout is not one JSON object (exit {:?}, signal {:?}); stdout {:?}; stderr {:?}",
                out.code,
                out.signal,
                clip(&stdout, 400),
                clip(&out.stderr_str(), 600)
            ));
        }
        Some(j) => {
            let outcome = j["outcome"].as_str().unwrap_or("?").to_string();
            let rule = rule_for(run.mode, case);
            let rule = rule.as_ref();
            let shown = match j["violation"]["syscall"].as_str() {
                Some(sc) => format!("{outcome}({sc})"),
                None => outcome.clone(),
            };
            got = match rule {
                Some(ContainerRule::Loses(reason)) => format!("{shown} [loses: {}]", clip(reason, 50)),
                _ => shown,
            };
            // The container rows: other outcomes, or a known loss of the mode.
            let specific = rule.is_none();
            let accepted = match rule {
                Some(ContainerRule::Expect { outcomes, .. }) => Some(outcomes.clone()),
                Some(ContainerRule::Loses(_)) => None,
                None => Some(case.outcomes.clone()),
            };
            if accepted.as_ref().is_some_and(|a| !a.contains(&outcome)) {
                failures.push(format!(
                    "outcome {outcome}, expected {}; error {}; stdout {:?}",
                    accepted.unwrap_or_default().join("|"),
                    j["error"],
                    clip(j["stdout"].as_str().unwrap_or(""), 300)
                ));
            }
            let expected_code = OUTCOMES.iter().find(|(n, _)| *n == outcome).map(|(_, c)| *c);
            let syntax = !j["syntax_error"].is_null();
            if !syntax && out.code != expected_code {
                failures
                    .push(format!("exit status {:?} does not match outcome {outcome} ({expected_code:?})", out.code));
            }
            if let Some(allowed) = case.violation.as_ref().filter(|_| specific) {
                if outcome == "violation" {
                    let sc = j["violation"]["syscall"].as_str().unwrap_or("");
                    if !allowed.iter().any(|a| a == sc) {
                        failures.push(format!("violation.syscall {sc:?}, expected {}", allowed.join("|")));
                    }
                }
            }
            let jstdout = j["stdout"].as_str().unwrap_or("");
            // Where programs may run, what showed the attack working unsandboxed must
            // not show.
            if run.mode == Mode::CompileProfileRoot {
                let jstderr = j["stderr"].as_str().unwrap_or("");
                for marker in subst(&case.cal_stdout_contains) {
                    if jstdout.contains(&marker) || jstderr.contains(&marker) {
                        failures
                            .push(format!("the attack's marker {marker:?} is in the output: {:?}", clip(jstdout, 300)));
                    }
                }
            }
            if let Some(exact) = case.stdout_exact.as_ref().filter(|_| specific) {
                let exact = host.substitute(exact);
                if jstdout != exact {
                    failures.push(format!("stdout {:?}, expected exactly {:?}", clip(jstdout, 400), exact));
                }
            }
            for c in subst(&case.stdout_contains).into_iter().filter(|_| specific) {
                if !jstdout.contains(&c) {
                    failures.push(format!("stdout lacks {c:?}: {:?}", clip(jstdout, 400)));
                }
            }
            for c in subst(&case.stdout_not).into_iter().filter(|_| specific) {
                if jstdout.contains(&c) {
                    failures.push(format!("stdout contains {c:?}: {:?}", clip(jstdout, 400)));
                }
            }
            let emsg = j["error"]["message"].as_str().unwrap_or("");
            for c in subst(&case.error_contains).into_iter().filter(|_| specific) {
                if !emsg.contains(&c) {
                    failures.push(format!("error message {emsg:?} lacks {c:?}"));
                }
            }
            if let Some(v) = case.value.as_ref().filter(|_| specific) {
                if !json_close(v, &j["value"]) {
                    failures.push(format!("value {}, expected {}", clip(&j["value"].to_string(), 400), v));
                }
            }
            if let Some(n) = case.plots.filter(|_| specific) {
                let plots = j["plots"].as_array().cloned().unwrap_or_default();
                if plots.len() != n {
                    failures.push(format!("{} plot(s), expected {n}", plots.len()));
                }
                for (i, p) in plots.iter().enumerate() {
                    let data = base64::engine::general_purpose::STANDARD
                        .decode(p["data_base64"].as_str().unwrap_or(""))
                        .unwrap_or_default();
                    if p["format"] != "png" || !data.starts_with(b"\x89PNG\r\n\x1a\n") {
                        failures.push(format!("plot {i} is not a PNG"));
                    }
                }
            }
            // --max-output covers stdout + stderr + the result: what comes back must fit
            // (a little slack for the frame's JSON punctuation).
            let limit = case.max_output();
            let carried = jstdout.len()
                + j["stderr"].as_str().map_or(0, str::len)
                + j["value"].to_string().len()
                + j["messages"].to_string().len()
                + j["warnings"].to_string().len()
                + j["plots"]
                    .as_array()
                    .map_or(0, |p| p.iter().map(|x| x["data_base64"].as_str().map_or(0, str::len)).sum());
            if carried as u64 > limit + OUTPUT_SLACK {
                failures.push(format!(
                    "the result carries {carried} bytes of output (stdout, stderr, value, messages, warnings, plots), \
                     over --max-output {limit} (outcome {outcome})"
                ));
            }
            if let Some(l) = j.get("layers").filter(|l| !l.is_null()) {
                // Without Landlock (and opted in), it must say so; everywhere else it holds.
                let landlock = if run.mode == Mode::NoLandlockRoot { "none" } else { "full" };
                if l["landlock"] != landlock || l["seccomp"] != Value::Bool(true) {
                    failures.push(format!("layers not as the mode gives them (landlock {landlock}, seccomp): {l}"));
                }
            }
        }
    }
    let stderr = out.stderr_str();
    for bad in ["panicked", "zygote stopped serving"] {
        if stderr.contains(bad) {
            failures.push(format!("the CLI's stderr says {bad:?}: {:?}", clip(&stderr, 400)));
        }
    }
    failures.extend(find_secrets(run, &out, json.as_ref()));
    if case.placeholders.contains("OUTPUT_DIR") {
        failures.extend(check_output_dir(run, Path::new(&host.placeholders["OUTPUT_DIR"])));
    }
    // Host side effects.
    for (name, (n, bytes)) in host.listener_counts(&s.dns) {
        if n > 0 || bytes > 0 {
            failures.push(format!("listener {name} received {n} connection(s)/packet(s), {bytes} byte(s)"));
        }
    }
    for (t, before, after) in host.changed_targets() {
        failures.push(format!("host file {t} changed: {before:?} -> {after:?}"));
    }
    failures.extend(run.check_planted());
    if let Some(change) = host.sleeper_changed() {
        failures.push(format!("the host process {{{{SLEEPER_PID}}}} was changed: {change}"));
    }
    let left = lingering(&zygote_link, out.pid);
    if !left.is_empty() {
        failures.push(format!(
            "{} process(es) of the sandbox survived the CLI by {LINGER:?}: {:?}",
            left.len(),
            left.iter().map(ProcInfo::describe).collect::<Vec<_>>()
        ));
        for p in &left {
            // SAFETY: killing leftovers of this case.
            unsafe { libc::kill(p.pid as i32, libc::SIGKILL) };
        }
    }
    for d in engine_dirs_of(out.pid).into_iter().filter(|d| !dirs_before.contains(d)) {
        failures.push(format!(
            "the engine's temp dir {} survived the CLI (contents {:?}); CLI stderr {:?}",
            d.display(),
            fs::read_dir(&d).map(|r| r.flatten().map(|e| e.file_name()).collect::<Vec<_>>()).unwrap_or_default(),
            clip(&out.stderr_str(), 400)
        ));
        make_removable(&d);
        fs::remove_dir_all(&d).ok();
    }
    if secs > bound {
        failures.push(format!("took {secs:.2} s, over the bound of {bound:.1} s (timeout + {TIME_SLACK} s)"));
    }
    host.cleanup(run);
    make_removable(&dir);
    fs::remove_dir_all(&dir).ok();
    Report {
        name: case.name.clone(),
        expected: match rule_for(run.mode, case) {
            Some(ContainerRule::Expect { outcomes, .. }) => outcomes.join("|"),
            _ => {
                case.outcomes.join("|")
                    + &case.violation.as_ref().map(|v| format!("({})", v.join("|"))).unwrap_or_default()
            }
        },
        got,
        exit: out.code.map_or(format!("sig{}", out.signal.unwrap_or(0)), |c| c.to_string()),
        seconds: secs,
        bound,
        failures,
        note: None,
    }
}

/// Run one case unsandboxed (calibration) and check that the attack works.
pub fn run_calibration(run: &Run, case: &Case, idx: usize) -> Report {
    let s = setup();
    match &case.calibrate {
        Calibrate::No(r) => {
            return Report {
                name: case.name.clone(),
                expected: "skipped".into(),
                got: "-".into(),
                exit: "-".into(),
                seconds: 0.0,
                bound: 0.0,
                failures: Vec::new(),
                note: Some(r.clone()),
            }
        }
        Calibrate::Yes => {}
    }
    let top = PathBuf::from(format!("/tmp/rsandbox-attack-cal-{}-{}-c{idx:03}", std::process::id(), run.tag));
    fs::create_dir(&top).unwrap();
    fs::set_permissions(&top, fs::Permissions::from_mode(0o700)).unwrap();
    let ws = top.join("ws");
    fs::create_dir(&ws).unwrap();
    let mut host = CaseHost::new(run, case, idx, &s.zygote);
    let code = host.substitute(&case.source);
    let file = top.join("case.R");
    fs::write(&file, &code).unwrap();

    let mut cmd = Command::new("unshare");
    cmd.args(["--fork", "--kill-child"]);
    if case.cal_pidns {
        cmd.args(["--pid", "--mount-proc"]);
    } else if case.targets.contains("listener:dns") {
        cmd.arg("--mount");
    }
    if case.cal_net {
        cmd.arg("--net");
    }
    let mut script = String::new();
    if case.targets.contains("listener:dns") {
        write!(script, "mount --bind {} /etc/resolv.conf || exit 99; ", run.resolv.display()).unwrap();
    }
    write!(script, "Rscript --vanilla {}; exit $?", file.display()).unwrap();
    cmd.args(["/bin/sh", "-c", &script]);
    cmd.env_clear()
        .current_dir(&ws)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .env("HOME", &run.home)
        .env("USER", "root")
        .env("RSANDBOX_ATTACK_TOKEN", &run.token)
        .env("AWS_SECRET_ACCESS_KEY", &run.token);
    let limit = Duration::from_secs_f64(case.cal_timeout);
    let out = run_collect(cmd, limit);
    std::thread::sleep(Duration::from_millis(50)); // let the listeners take a last look
    let mut failures = Vec::new();
    let stdout = out.stdout_str();
    if out.killed_by_runner {
        failures.push(format!("did not finish within the calibration limit of {:.0} s", case.cal_timeout));
    }
    if out.code != Some(case.cal_exit) {
        failures.push(format!(
            "exit {:?} (signal {:?}), expected {}; stderr {:?}",
            out.code,
            out.signal,
            case.cal_exit,
            clip(&out.stderr_str(), 600)
        ));
    }
    for c in case.cal_stdout_contains.iter().map(|c| host.substitute(c)) {
        if !stdout.contains(&c) {
            failures.push(format!(
                "stdout lacks {c:?}: {:?}; stderr {:?}",
                clip(&stdout, 400),
                clip(&out.stderr_str(), 400)
            ));
        }
    }
    let counts = host.listener_counts(&s.dns);
    for l in &case.cal_received {
        if l == "dns" {
            if let Some(e) = &s.dns.error {
                failures.push(format!("the DNS listener is unavailable ({e})"));
                continue;
            }
        }
        let (n, bytes) = counts[l.as_str()];
        if n == 0 && bytes == 0 {
            failures.push(format!("listener {l} received nothing"));
        }
    }
    let mut changed: BTreeSet<String> = host.changed_targets().into_iter().map(|(t, _, _)| t).collect();
    if host.sleeper_changed().is_some() {
        changed.insert("proc:sleeper".into());
    }
    for f in &case.cal_changed {
        if !changed.contains(f) {
            failures.push(format!("{f} did not change"));
        }
    }
    // Restore planted files the calibration changed (e.g. a chmod), quietly.
    run.check_planted();
    host.cleanup(run);
    make_removable(&top);
    fs::remove_dir_all(&top).ok();
    Report {
        name: case.name.clone(),
        expected: "attack works".into(),
        got: if failures.is_empty() { "works".into() } else { "FAILED".into() },
        exit: out.code.map_or(format!("sig{}", out.signal.unwrap_or(0)), |c| c.to_string()),
        seconds: out.elapsed.as_secs_f64(),
        bound: case.cal_timeout,
        failures,
        note: None,
    }
}

// =======================================================================================
// Driving a whole run.
// =======================================================================================

fn workers(mode: Mode) -> usize {
    // Without user namespaces every sandbox of the attack user shares its uid, so
    // RLIMIT_NPROC counts the victim's processes and every case running beside this one
    // together (a known loss of the mode): one case at a time, so that the legitimate
    // cases that fork keep room to fork.
    let default =
        if matches!(mode, Mode::ContainerUser | Mode::NoUserNamespacesUser | Mode::DockerUser) { 1 } else { 3 };
    std::env::var("RSANDBOX_ATTACK_WORKERS").ok().and_then(|w| w.parse().ok()).filter(|&w| w > 0).unwrap_or(default)
}

/// Cases selected by `RSANDBOX_ATTACK_FILTER` (substring of the name), all by default.
pub fn selected(cases: Vec<Case>) -> Vec<Case> {
    match std::env::var("RSANDBOX_ATTACK_FILTER") {
        Ok(f) if !f.is_empty() => cases.into_iter().filter(|c| f.split(',').any(|p| c.name.contains(p))).collect(),
        _ => cases,
    }
}

/// Run every case in `mode`; print the table; return the failures.
pub fn run_corpus(mode: Mode) -> (Vec<Report>, Vec<String>) {
    let mut cases = selected(load_corpus());
    if mode == Mode::CompileProfileRoot {
        cases.retain(|c| c.compile.is_some());
    }
    let started = Instant::now();
    let run = Run::start(mode);
    // Longest first, so the slow ones do not end up alone at the tail.
    let mut order: Vec<usize> = (0..cases.len()).collect();
    let weight = |c: &Case| {
        let slow = c.outcomes.iter().any(|o| o == "timeout") || c.cal_received.iter().any(|l| l == "dns");
        if slow {
            c.timeout()
        } else {
            0.0
        }
    };
    order.sort_by(|&a, &b| weight(&cases[b]).partial_cmp(&weight(&cases[a])).unwrap());
    let next = AtomicUsize::new(0);
    let reports: Mutex<Vec<Option<Report>>> = Mutex::new((0..cases.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers(mode) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(&idx) = order.get(i) else { return };
                let case = &cases[idx];
                let report = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match mode {
                    Mode::Calibration => run_calibration(&run, case, idx),
                    _ => run_sandboxed(&run, case, idx),
                }))
                .unwrap_or_else(|e| {
                    let msg =
                        e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
                    Report {
                        name: case.name.clone(),
                        expected: "-".into(),
                        got: "runner panic".into(),
                        exit: "-".into(),
                        seconds: 0.0,
                        bound: 0.0,
                        failures: vec![format!("the runner panicked: {}", msg.unwrap_or_default())],
                        note: None,
                    }
                });
                reports.lock().unwrap()[idx] = Some(report);
            });
        }
    });
    let global = run.finish();
    let reports: Vec<Report> = reports.into_inner().unwrap().into_iter().map(|r| r.unwrap()).collect();
    print_table(mode, &reports, &global, started.elapsed());
    (reports, global)
}

fn print_table(mode: Mode, reports: &[Report], global: &[String], took: Duration) {
    let mut t = String::new();
    writeln!(t, "\n=== attack corpus as {} ({} cases, {:.1} s) ===", mode.label(), reports.len(), took.as_secs_f64())
        .unwrap();
    writeln!(t, "{:<5} {:<44} {:<26} {:<26} {:>5} {:>7} {:>6}", "", "case", "expected", "got", "exit", "secs", "bound")
        .unwrap();
    for r in reports {
        let status = if r.note.is_some() {
            "skip"
        } else if r.failures.is_empty() {
            "ok"
        } else {
            "FAIL"
        };
        writeln!(
            t,
            "{status:<5} {:<44} {:<26} {:<26} {:>5} {:>7.2} {:>6.1}",
            r.name, r.expected, r.got, r.exit, r.seconds, r.bound
        )
        .unwrap();
        if let Some(n) = &r.note {
            writeln!(t, "        not calibrated: {n}").unwrap();
        }
        for f in &r.failures {
            writeln!(t, "        - {f}").unwrap();
        }
    }
    for g in global {
        writeln!(t, "GLOBAL  - {g}").unwrap();
    }
    let failed = reports.iter().filter(|r| !r.failures.is_empty()).count();
    let skipped = reports.iter().filter(|r| r.note.is_some()).count();
    writeln!(
        t,
        "=== {}: {} passed, {} failed, {} skipped, {} run-level problem(s) ===",
        mode.label(),
        reports.len() - failed - skipped,
        failed,
        skipped,
        global.len()
    )
    .unwrap();
    println!("{t}");
    std::io::stdout().flush().ok();
}

/// Panic with the names and reasons of everything that failed.
pub fn assert_clean(mode: Mode, reports: &[Report], global: &[String]) {
    let mut msg = String::new();
    for r in reports.iter().filter(|r| !r.failures.is_empty()) {
        writeln!(msg, "  {}: {}", r.name, r.failures.join("; ")).unwrap();
    }
    for g in global {
        writeln!(msg, "  (run) {g}").unwrap();
    }
    assert!(msg.is_empty(), "attack corpus as {}: failures:\n{msg}", mode.label());
}

// =======================================================================================
// The environment matrix in the README, generated by the corpus rows.
// =======================================================================================

const MATRIX_BEGIN: &str = "<!-- environment matrix: generated by crates/rsandbox-cli/tests/attacks.rs";
const MATRIX_END: &str = "<!-- end of environment matrix -->";

/// `rsandbox check --json [extra]` in the mode's environment, as the mode's identity.
pub fn check_in(mode: Mode, extra: &[&str]) -> Value {
    let s = setup();
    let mut c = Command::new(&s.cli);
    c.env_clear()
        .current_dir("/")
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .env("RSANDBOX_NO_DAEMON", "1");
    if mode.user() {
        as_user(&mut c);
        c.env("HOME", attack_user().home);
    } else {
        c.env("HOME", "/root");
    }
    mode.enter(&mut c);
    c.env("RSANDBOX_ZYGOTE", &s.zygote).args(["check", "--json"]).args(extra);
    let out = c.output().expect("run rsandbox check");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("check --json as {}: {e}: {}", mode.label(), String::from_utf8_lossy(&out.stderr)))
}

/// The mode's row of the matrix: where, how rsandbox is run there, what `check` says an
/// evaluation gets, and the corpus result.
pub fn matrix_row(mode: Mode, reports: &[Report]) -> String {
    let (place, who) = match mode {
        Mode::Root => ("host", "root"),
        Mode::User => ("host", "user"),
        Mode::ContainerRoot => ("container default seccomp profile", "root"),
        Mode::ContainerUser => ("container default seccomp profile", "user"),
        Mode::NoLandlockRoot => ("kernel without Landlock", "root"),
        Mode::NoUserNamespacesUser => ("no unprivileged user namespaces", "user"),
        Mode::ChrootRoot => ("chroot, `/` not a mount point", "root"),
        Mode::BaseProfileRoot => ("host, `--profile base`", "root"),
        Mode::CompileProfileRoot => ("host, `--profile compile` (the cases that run unlisted programs)", "root"),
        Mode::DockerRoot => {
            ("Docker, default seccomp profile, `no-new-privileges`", "root (Docker's default capabilities)")
        }
        Mode::DockerUser => ("Docker, default seccomp profile, `no-new-privileges`", "user (no capabilities)"),
        Mode::Calibration => unreachable!("the calibration has no row"),
    };
    let default = check_in(mode, &[]);
    let default_text = if default["evaluation"]["runs"] == Value::Bool(true) {
        "runs".to_string()
    } else {
        let error = default["evaluation"]["error"].as_str().unwrap_or("");
        let named = ["--no-namespaces", "--best-effort"].into_iter().find(|o| error.contains(o)).unwrap_or("no option");
        format!("refused, names `{named}`")
    };
    let with = check_in(mode, mode.cli_flags());
    let l = &with["evaluation"]["layers"];
    let yes = |v: &Value| if v == &Value::Bool(true) { "yes" } else { "no" };
    let namespaces = l["namespaces"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "none".into());
    let quota = l["workspace_quota"].as_u64().map_or("not enforced".to_string(), |b| format!("{} MiB", b >> 20));
    let identity = if l["identity"].is_null() { "caller's uid" } else { "own uid" };
    let layers = format!(
        "namespaces {namespaces}; private root {}; disk quota {quota}; Landlock {}; seccomp {}; {identity}",
        yes(&l["private_root"]),
        l["landlock"].as_str().unwrap_or("?"),
        yes(&l["seccomp"])
    );
    let losses: Vec<&str> = reports.iter().filter(|r| r.got.contains("[loses:")).map(|r| r.name.as_str()).collect();
    let held = reports.iter().filter(|r| r.failures.is_empty()).count() - losses.len();
    let corpus = if losses.is_empty() {
        format!("{held} of {} hold", reports.len())
    } else {
        format!("{held} of {} hold; marked as losses here, checks skipped: {}", reports.len(), losses.join(", "))
    };
    let flags =
        if mode.cli_flags().is_empty() { "—".to_string() } else { format!("`{}`", mode.cli_flags().join(" ")) };
    format!("| {place} | {who} | {default_text} | {flags} | {layers} | {corpus} |")
}

/// Check the mode's row of the README's matrix against this run; with
/// `RSANDBOX_UPDATE_README=1`, write it instead.
pub fn check_matrix_row(mode: Mode, reports: &[Report]) {
    let row = matrix_row(mode, reports);
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = fs::read_to_string(&readme_path).expect("read README.md");
    let (Some(begin), Some(end)) = (readme.find(MATRIX_BEGIN), readme.find(MATRIX_END)) else {
        panic!("README.md has no environment matrix (markers {MATRIX_BEGIN:?} … {MATRIX_END:?})");
    };
    let key = row.splitn(4, '|').take(3).collect::<Vec<_>>().join("|");
    let table = &readme[begin..end];
    let current = table.lines().find(|l| l.starts_with(&key));
    if current == Some(row.as_str()) {
        return;
    }
    if std::env::var_os("RSANDBOX_UPDATE_README").is_some() {
        let mut lines: Vec<String> = table.lines().map(str::to_string).collect();
        match lines.iter().position(|l| l.starts_with(&key)) {
            Some(i) => lines[i] = row,
            None => lines.push(row),
        }
        let updated = format!("{}{}\n{}", &readme[..begin], lines.join("\n"), &readme[end..]);
        fs::write(&readme_path, updated).expect("write README.md");
        return;
    }
    panic!(
        "the README's environment matrix is out of date for {}:\n  README: {}\n  this run: {row}\n\
         (RSANDBOX_UPDATE_README=1 with the full corpus rewrites it)",
        mode.label(),
        current.unwrap_or("(no row)")
    );
}
