//! Learning a profile (`rsandbox learn FILE.R`): run trusted code in the sandbox and
//! write down what it needed, as a profile that lets it run (RAppArmor's "complain"
//! mode, without strace or the kernel's audit log).
//!
//! How it observes: the code runs in a session of a sandbox in learning mode
//! (`lockdown::observe`) under the profile learned so far. The kernel's refusals come
//! back in the result ([`LearningReport`]): every file the Landlock rules refused (to
//! read, write or run), and every forbidden call, answered with `EPERM` instead of
//! ending the sandbox. Everything refused is added at once ([`steps_from_report`]) and
//! the code runs again, until nothing is refused and it runs to the end. A package that
//! is not there is looked for in the caller's own R libraries (from R's message: R
//! looks only in its library paths, so the kernel never sees that attempt). What R
//! loaded, and the peak of time, CPU and memory, come from the successful run. A
//! forbidden call no profile grants is listed, and makes the learning fail.

use crate::config::EngineConfig;
use crate::errors::EngineError;
use crate::options::EvalOptions;
use crate::profile::Profile;
use crate::result::{EvalResult, LearningReport, Outcome};
use crate::session::ExecuteOptions;
use crate::Engine;
use lockdown::observe::FileAccess;
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// Runs at most this many times (each adds what the previous one missed).
pub const MAX_ROUNDS: usize = 12;

/// What learning found.
#[derive(Debug)]
pub struct Learned {
    /// Directories read outside R and the system libraries.
    pub read: Vec<PathBuf>,
    /// R libraries outside the site and system ones.
    pub libraries: Vec<PathBuf>,
    /// The built-in profile the learned one extends: the one learning started from, or
    /// `compile` once the code ran a program.
    pub extends: String,
    /// Programs beyond the extended profile's.
    pub exec: Vec<PathBuf>,
    /// Directories the code wrote to outside its workspace.
    pub write: Vec<PathBuf>,
    /// Packages the code loaded (beyond R's base packages).
    pub packages: Vec<String>,
    /// Forbidden system calls the code made (besides starting programs): in learning
    /// they were refused with an error; under any profile each ends the sandbox.
    pub refused_calls: Vec<String>,
    /// The network allowlist: the starting profile's, plus each host the code tried to
    /// reach (`None`: no network).
    pub network: Option<crate::network::Network>,
    /// Suggested limits, with headroom.
    pub limits: SuggestedLimits,
    /// For the person reading: what was added and why, and what could not be.
    pub notes: Vec<String>,
    /// The last run's result (ok when learning succeeded).
    pub last: EvalResult,
    /// Whether the code ran to the end under the learned profile.
    pub succeeded: bool,
}

/// Limits to start from: the peak of the successful run, with headroom.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SuggestedLimits {
    /// Seconds.
    pub timeout: u64,
    /// CPU seconds.
    pub cpu: u64,
    /// Memory, in MiB.
    pub memory_mib: u64,
}

/// Learn what `code` needs, starting from `config`'s profile, each run limited by
/// `options` (generous by default: learning is for code you trust).
pub fn learn(config: &EngineConfig, code: &str, options: &EvalOptions) -> Result<Learned, EngineError> {
    let mut profile = config.profile.clone();
    let mut extends =
        if ["base", "compile"].contains(&profile.name.as_str()) { profile.name.clone() } else { "strict".to_string() };
    let mut exec: Vec<PathBuf> = Vec::new();
    let mut notes = Vec::new();
    let mut tried: BTreeSet<String> = BTreeSet::new();
    let mut refused_calls: Vec<String> = Vec::new();
    // Directories added to `write` on the guess that the code creates these files there.
    let mut guessed_writes: Vec<(PathBuf, String)> = Vec::new();
    for round in 1..=MAX_ROUNDS {
        let started = Engine::start(EngineConfig {
            profile: profile.clone(),
            warm: false,
            prefork: 0,
            learning: true,
            ..config.clone()
        })
        .and_then(|engine| engine.session(options.clone(), Vec::new()).map(|session| (engine, session)));
        let (_engine, session) = match started {
            Ok(started) => started,
            // The profile as first given is the caller's to fix; one learned so far is ours.
            Err(e) if round > 1 => {
                return Err(EngineError::Setup(format!("{e} (with the profile learned so far: {})", notes.join("; "))))
            }
            Err(e) => return Err(e),
        };
        let run =
            ExecuteOptions { timeout: options.timeout, max_output: options.max_output, ..ExecuteOptions::default() };
        let result = session.execute(code, &run)?;
        let report = result
            .learning
            .clone()
            .ok_or_else(|| EngineError::Setup("the sandbox did not run in learning mode".into()))?;
        if report.truncated {
            notes.push(format!(
                "round {round}: more was refused than one report holds; what was left out shows in the next round"
            ));
        }
        // A guess holds only if the file now exists on the host.
        for (dir, file) in std::mem::take(&mut guessed_writes) {
            if !Path::new(&file).exists() {
                notes.push(format!(
                    "round {round}: {file} was still not written with write = {}: removed again (a directory the \
                     sandbox's uid may not write: as root each sandbox has a uid of its own, so give it mode 1777 or use --uid)",
                    dir.display()
                ));
                profile.write.retain(|w| *w != dir);
            }
        }
        for call in &report.refused_calls {
            if !refused_calls.contains(call) && !EXEC_CALLS.contains(&call.as_str()) {
                notes.push(format!("round {round}: it made the forbidden call {call}: refused with EPERM and listed (no profile grants a system call)"));
                refused_calls.push(call.clone());
            }
        }
        let (steps, skipped) = steps_from_report(&report, &mut tried, &extends, &profile);
        notes.extend(skipped.into_iter().map(|s| format!("round {round}: {s}")));
        // Hosts the proxy refused (the learning sandbox always has one): each becomes an
        // allow entry, and the code runs again to reach it.
        let hosts = hosts_to_allow(&result, profile.network.as_ref());
        for host in &hosts {
            notes.push(format!("round {round}: it tried to reach {host}; added it to [network] allow"));
            profile.network.get_or_insert_with(crate::network::Network::default).allow.push(host.clone());
        }
        let learned_hosts = !hosts.is_empty();
        // Ran to the end with nothing refused, or failed in a way nothing can fix: done,
        // with the packages, limits and verdict of that ending.
        let mut ending = None;
        if steps.is_empty() && !learned_hosts && result.outcome == Outcome::Ok {
            let loaded = session.execute("sort(loadedNamespaces())", &ExecuteOptions::default())?;
            // A package allowlist needs the private root: without namespaces, none.
            let packages = if config.namespaces { loaded_packages(&loaded.value) } else { Vec::new() };
            // Under a profile the refused calls end the sandbox instead of failing.
            let succeeded = refused_calls.is_empty();
            notes.push(if succeeded {
                format!("ran to the end in round {round}")
            } else {
                format!(
                    "ran to the end in round {round} only because learning answered {} with an error; under any \
                     profile such a call ends the sandbox, so no profile lets this code run",
                    refused_calls.join(", ")
                )
            });
            ending = Some((packages, suggest(&result), succeeded));
        }
        let steps = if ending.is_none() && steps.is_empty() && !learned_hosts {
            next_step(&result, &failure_text(&result), &tried).into_iter().collect()
        } else {
            steps
        };
        if ending.is_none() && steps.is_empty() && !learned_hosts {
            notes.push(why_not(&result, &failure_text(&result)));
            ending = Some((Vec::new(), SuggestedLimits::default(), false));
        }
        if let Some((packages, limits, succeeded)) = ending {
            return Ok(Learned {
                read: profile.read,
                libraries: profile.libraries,
                extends,
                exec,
                write: profile.write,
                packages,
                refused_calls,
                network: profile.network.clone().filter(|n| n.is_on()),
                limits,
                notes,
                last: result,
                succeeded,
            });
        }
        for step in steps {
            match step {
                Step::Write(dir, file) => {
                    notes.push(format!("round {round}: it could not create {file}; added write = {} (review: the sandbox may write anything there)", dir.display()));
                    if !profile.write.contains(&dir) {
                        profile.write.push(dir.clone());
                    }
                    guessed_writes.push((dir, file));
                }
                Step::Read(root, file) => {
                    let review = if root.is_dir() { " (review: every file there becomes readable)" } else { "" };
                    notes
                        .push(format!("round {round}: it was refused {file}; added read = {}{review}", root.display()));
                    profile.read.push(root);
                }
                Step::Library(library, package) => {
                    tried.insert(package.clone());
                    notes.push(format!(
                        "round {round}: package {package} is in {}; added it to libraries",
                        library.display()
                    ));
                    profile.libraries.push(library);
                }
                Step::Compile => {
                    notes.push(format!(
                        "round {round}: it ran a program (execve); now extends = \"compile\" (the toolchain and shell utilities may run; \
                         review: `rsandbox check --profile compile` lists them)"
                    ));
                    // The compile profile's programs and reads, with what was learned so far.
                    let compile = Profile::compile();
                    let mut read = compile.read;
                    read.extend(profile.read.iter().filter(|p| !read.contains(p)).cloned().collect::<Vec<_>>());
                    profile = Profile { exec: compile.exec, read, ..profile };
                    extends = "compile".into();
                }
                Step::Program(program) => {
                    notes.push(format!("round {round}: it ran {}; added it to exec", program.display()));
                    profile.exec.push(program.clone());
                    exec.push(program);
                }
            }
        }
    }
    Err(EngineError::Setup(format!("learning did not converge in {MAX_ROUNDS} runs")))
}

/// The hosts of this run's connections the allowlist refused, as allow entries (`host`,
/// or `host:port` off 443), each once and not already allowed. Only names: an IP literal
/// (refused in any form) is never learned.
fn hosts_to_allow(result: &EvalResult, network: Option<&crate::network::Network>) -> Vec<String> {
    let mut hosts: Vec<String> = Vec::new();
    for record in result.network.iter().filter(|r| !r.allowed && !r.host.is_empty()) {
        if !record.reason.as_deref().is_some_and(|r| r.contains("network.allow")) {
            continue;
        }
        let entry = if record.port == 443 { record.host.clone() } else { format!("{}:{}", record.host, record.port) };
        let is_name = crate::network::Network { allow: vec![entry.clone()], ..Default::default() }.policy().is_ok();
        let known = network.is_some_and(|n| n.allow.contains(&entry)) || hosts.contains(&entry);
        if is_name && !known {
            hosts.push(entry);
        }
    }
    hosts
}

/// The calls that start a program: refused under a profile without programs, learned as
/// a switch to `compile`.
const EXEC_CALLS: [&str; 2] = ["execve", "execveat"];

enum Step {
    /// A tree (or one file) to make readable, for the file the code was refused.
    Read(PathBuf, String),
    /// A directory to make writable, for the file the code could not create there.
    Write(PathBuf, String),
    Library(PathBuf, String),
    /// Learn on under the `compile` profile.
    Compile,
    /// A program to add to `exec`.
    Program(PathBuf),
}

/// What to add for what the kernel refused (the sandbox's learning report): every
/// refused file at once, so that a run that stops at its first refusal still converges.
/// Only host paths that exist become reads and programs (a path that exists nowhere is
/// the code's own error); a file refused for writing makes its directory writable,
/// when [`crate::profile::writable_dir`] allows it. Places where secrets or kernel state
/// live are never learned (see [`never_learned`]), and each path is tried once.
///
/// Returns the steps, and a note for each path not learned because of where it is.
fn steps_from_report(
    report: &LearningReport,
    tried: &mut BTreeSet<String>,
    extends: &str,
    profile: &Profile,
) -> (Vec<Step>, Vec<String>) {
    let (mut steps, mut skipped) = (Vec::new(), Vec::new());
    if extends != "compile" && report.refused_calls.iter().any(|c| EXEC_CALLS.contains(&c.as_str())) {
        return (vec![Step::Compile], skipped);
    }
    for refused in &report.refused_files {
        let path = Path::new(&refused.path);
        if !tried.insert(format!("{:?} {}", refused.access, refused.path)) {
            continue;
        }
        // Landlock judges the file a path leads to (a link into /etc is judged in /etc):
        // so is what is learned.
        let target = match refused.access {
            FileAccess::Write => {
                path.parent().and_then(|d| d.canonicalize().ok()).zip(path.file_name()).map(|(d, n)| d.join(n))
            }
            FileAccess::Read | FileAccess::Execute => path.canonicalize().ok(),
        };
        // A path that exists nowhere on the host is the code's own error.
        let Some(target) = target else { continue };
        // Everything below judges the resolved path, the one that would be learned
        // (`/usr/../dev/shm/x` is /dev/shm/x). Kernel and runtime state (/proc, /sys,
        // /dev with the terminals, /run): probed by R, shells and libc on every run,
        // needed by none of them, never learned.
        if is_kernel_state(path) || is_kernel_state(&target) {
            continue;
        }
        if let Some(why) = never_learned(&target) {
            skipped.push(format!(
                "it was refused {} ({why}): not learned; add it by hand if the code needs it",
                target.display()
            ));
            continue;
        }
        let covered = |roots: &[PathBuf]| roots.iter().any(|r| target.starts_with(r));
        match refused.access {
            FileAccess::Read if !covered(&profile.read) => {
                if steps.iter().any(|s| matches!(s, Step::Read(r, _) if target.starts_with(r))) {
                    continue;
                }
                match read_root(&target) {
                    Some(root) => steps.push(Step::Read(root, refused.path.clone())),
                    None => skipped.push(format!(
                        "it was refused the directory {} (too broad to give away): not learned",
                        target.display()
                    )),
                }
            }
            FileAccess::Write => {
                let Some(dir) = target.parent().filter(|d| d.is_dir() && crate::profile::writable_dir(d).is_ok())
                else {
                    continue;
                };
                if !covered(&profile.write) && !steps.iter().any(|s| matches!(s, Step::Write(d, _) if d == dir)) {
                    steps.push(Step::Write(dir.to_path_buf(), refused.path.clone()));
                }
            }
            FileAccess::Execute => {
                // Only a program of the system, never a file the code made.
                if !(target.is_file() && (target.starts_with("/usr") || target.starts_with("/bin"))) {
                    continue;
                }
                if !profile.exec.contains(&target)
                    && !steps.iter().any(|s| matches!(s, Step::Program(p) if *p == target))
                {
                    steps.push(Step::Program(target));
                }
            }
            FileAccess::Read => {}
        }
    }
    (steps, skipped)
}

/// Trees of kernel and runtime state: never learned, and not worth a note.
const KERNEL_STATE: [&str; 4] = ["/proc", "/sys", "/dev", "/run"];

fn is_kernel_state(path: &Path) -> bool {
    KERNEL_STATE.iter().any(|p| path.starts_with(p))
}

/// Files in /etc that hold the host's accounts and secrets, matched as name prefixes so
/// that their backups (`shadow-`, `passwd.bak`) and companions (`sudoers.d`) are too.
const ACCOUNT_FILES: [&str; 7] = ["passwd", "group", "shadow", "gshadow", "sudoers", "subuid", "subgid"];

/// Directories of the host's keys.
const SECRET_TREES: [&str; 3] = ["/etc/ssh", "/etc/ssl/private", "/etc/security"];

/// Why a refused path is never added to a profile, if it is not: hidden files and
/// directories (where credentials and settings live: `~/.ssh`, `~/.aws`, `~/.Renviron`),
/// and the host's accounts and secrets (a sandbox's uid is in neither). Add such a path
/// by hand if the code needs it.
fn never_learned(path: &Path) -> Option<&'static str> {
    if path.components().any(|c| matches!(c, Component::Normal(name) if name.to_string_lossy().starts_with('.'))) {
        return Some("a hidden file or directory");
    }
    let in_etc = path.strip_prefix("/etc").ok().and_then(|rest| rest.components().next());
    if let Some(Component::Normal(first)) = in_etc {
        let first = first.to_string_lossy();
        if ACCOUNT_FILES.iter().any(|name| first.starts_with(name)) {
            return Some("the host's accounts");
        }
    }
    if SECRET_TREES.iter().any(|tree| path.starts_with(tree)) {
        return Some("the host's keys");
    }
    None
}

/// What to make readable for a refused `path` (resolved): its directory (itself when it
/// is one), so that the code's other files there come with it; the file alone when that
/// directory is too broad to give away (`/`, a top-level directory like `/etc`, a home
/// directory); nothing for such a directory itself.
fn read_root(path: &Path) -> Option<PathBuf> {
    let broad = |dir: &Path| {
        let depth = dir.components().filter(|c| matches!(c, Component::Normal(_))).count();
        depth < 2 || dir.parent() == Some(Path::new("/home")) || dir == Path::new("/root")
    };
    if path.is_dir() {
        return (!broad(path)).then(|| path.to_path_buf());
    }
    let dir = path.parent()?;
    Some(if broad(dir) { path.to_path_buf() } else { dir.to_path_buf() })
}

/// The error, warnings and stderr of a failed run: where R names what it could not do.
fn failure_text(result: &EvalResult) -> String {
    let mut text = String::new();
    if let Some(e) = &result.error {
        text.push_str(&e.message);
        text.push('\n');
    }
    for w in &result.warnings {
        text.push_str(&w.message);
        text.push('\n');
    }
    text.push_str(&result.stderr);
    text
}

/// A package R could not find, when one of the caller's own R libraries has it (R looks
/// only in its library paths, so the kernel never sees the attempt).
fn next_step(result: &EvalResult, text: &str, tried: &BTreeSet<String>) -> Option<Step> {
    if result.outcome != Outcome::Error {
        return None;
    }
    let package = quoted_after(text, "there is no package called ").filter(|p| !tried.contains(p))?;
    let library =
        crate::profile::user_libraries().into_iter().find(|l| l.join(&package).join("DESCRIPTION").is_file())?;
    Some(Step::Library(library, package))
}

/// The text between the quotes after `marker` (R quotes with '…', ‘…’ or "…").
fn quoted_after(text: &str, marker: &str) -> Option<String> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let (open, close) = match rest.chars().next()? {
        '\'' => ('\'', '\''),
        '"' => ('"', '"'),
        '‘' => ('‘', '’'),
        _ => return None,
    };
    let inner = &rest[open.len_utf8()..];
    Some(inner[..inner.find(close)?].to_string())
}

/// Why learning stopped, for the notes.
fn why_not(result: &EvalResult, text: &str) -> String {
    match result.outcome {
        Outcome::Violation => {
            let call = result.violation.as_ref().map_or("a forbidden system call", |v| v.syscall.as_str());
            format!("stopped: the code made the forbidden call {call}, which no profile grants")
        }
        Outcome::Ok => "ran to the end".into(),
        Outcome::Error => {
            format!("stopped: the code failed with an error learning cannot fix: {}", text.lines().next().unwrap_or(""))
        }
        other => format!("stopped: {} (raise the limit with --timeout, --memory, --cpu)", other.name()),
    }
}

/// Packages beyond R's base set, from `sort(loadedNamespaces())`.
fn loaded_packages(value: &serde_json::Value) -> Vec<String> {
    let base = crate::profile::BASE_PACKAGES;
    match value {
        serde_json::Value::Array(items) => {
            items.iter().filter_map(|v| v.as_str()).filter(|p| !base.contains(p)).map(str::to_string).collect()
        }
        serde_json::Value::String(one) if !base.contains(&one.as_str()) => vec![one.clone()],
        _ => Vec::new(),
    }
}

/// The run's peak with headroom: three times the time and CPU plus five seconds, twice
/// the memory (at least 256 MiB).
fn suggest(result: &EvalResult) -> SuggestedLimits {
    let u = &result.usage;
    let cpu_ms = u.sandbox_cpu_ms.unwrap_or(u.cpu_ms);
    let memory_kb = u.sandbox_memory_kb.unwrap_or(u.max_rss_kb);
    SuggestedLimits {
        timeout: Duration::from_millis(u.wall_ms * 3).as_secs() + 5,
        cpu: cpu_ms * 3 / 1000 + 5,
        memory_mib: ((memory_kb * 2) >> 10).max(256),
    }
}

/// A `hosts` value as TOML: one address as a string, several as an array.
fn toml_addresses(addresses: &crate::network::HostAddresses) -> String {
    match addresses {
        crate::network::HostAddresses::One(one) => format!("{one:?}"),
        crate::network::HostAddresses::Several(all) => {
            format!("[{}]", all.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>().join(", "))
        }
    }
}

impl Learned {
    /// The profile as TOML, ready for `--profile`.
    pub fn to_toml(&self) -> String {
        let list = |items: Vec<String>| items.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ");
        let paths = |p: &[PathBuf]| list(p.iter().map(|p| p.display().to_string()).collect());
        let mut out = format!("# learned by rsandbox learn; review before use\nextends = {:?}\n", self.extends);
        // What the extended profile reads comes with it.
        let inherited = Profile::load(&self.extends).map(|p| p.read).unwrap_or_default();
        let read: Vec<PathBuf> = self.read.iter().filter(|p| !inherited.contains(p)).cloned().collect();
        if !read.is_empty() {
            out.push_str(&format!("read = [{}]\n", paths(&read)));
        }
        if !self.write.is_empty() {
            out.push_str(&format!("write = [{}]\n", paths(&self.write)));
        }
        if !self.exec.is_empty() {
            out.push_str(&format!("exec = [{}]\n", paths(&self.exec)));
        }
        if !self.libraries.is_empty() {
            out.push_str(&format!("libraries = [{}]\n", paths(&self.libraries)));
        }
        if !self.packages.is_empty() {
            out.push_str(&format!("packages = [{}]\n", list(self.packages.clone())));
        }
        if !self.refused_calls.is_empty() {
            out.push_str(&format!(
                "# forbidden system calls the code made (no profile grants them; each ends the sandbox): {}\n",
                self.refused_calls.join(", ")
            ));
        }
        if let Some(network) = &self.network {
            out.push_str(&format!("\n[network]\nallow = [{}]\n", list(network.allow.clone())));
            if !network.hosts.is_empty() {
                let hosts: Vec<String> =
                    network.hosts.iter().map(|(name, a)| format!("{name:?} = {}", toml_addresses(a))).collect();
                out.push_str(&format!("hosts = {{ {} }}\n", hosts.join(", ")));
            }
        }
        if self.succeeded {
            let l = &self.limits;
            out.push_str(&format!(
                "\n[limits]\ntimeout = {}\ncpu = {}\nmemory = \"{}M\"\n",
                l.timeout, l.cpu, l.memory_mib
            ));
        }
        out
    }

    /// The profile this learned, for checking it at once (`Profile::parse` of `to_toml`).
    pub fn profile(&self) -> Result<Profile, crate::InputError> {
        Profile::parse("learned", &self.to_toml())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_names_are_found_in_r_messages() {
        assert_eq!(
            quoted_after("cannot open file '/srv/x.csv': No such file", "cannot open file ").as_deref(),
            Some("/srv/x.csv")
        );
        assert_eq!(
            quoted_after("there is no package called ‘tinypkg’", "there is no package called ").as_deref(),
            Some("tinypkg")
        );
        assert_eq!(quoted_after("cannot open file \"a b\"", "cannot open file ").as_deref(), Some("a b"));
        assert_eq!(quoted_after("nothing here", "cannot open file "), None);
    }

    fn refused(path: &str, access: FileAccess) -> crate::result::RefusedFile {
        crate::result::RefusedFile { path: path.into(), access }
    }

    #[test]
    fn what_is_refused_becomes_steps_and_what_is_not_to_be_learned_stays_out() {
        let dir = std::env::temp_dir().join(format!("rsandbox-learn-unit-{}", std::process::id()));
        let (data, out) = (dir.join("data"), dir.join("out"));
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(data.join("a.csv"), "x").unwrap();
        std::fs::write(data.join("b.csv"), "y").unwrap();
        std::os::unix::fs::symlink(data.join("a.csv"), out.join("link.csv")).unwrap();
        let p = |p: &Path| p.display().to_string();
        let report = LearningReport {
            refused_files: vec![
                refused(&p(&data.join("a.csv")), FileAccess::Read),
                // Covered by the directory the first one adds.
                refused(&p(&data.join("b.csv")), FileAccess::Read),
                // Judged where the link leads.
                refused(&p(&out.join("link.csv")), FileAccess::Read),
                refused(&p(&out.join("new.txt")), FileAccess::Write),
                // Exists nowhere: the code's own error.
                refused(&p(&dir.join("none/x.csv")), FileAccess::Read),
                refused("/proc/self/maps", FileAccess::Read),
                refused("/etc/passwd", FileAccess::Read),
                refused("/", FileAccess::Read),
                refused("/usr/bin/env", FileAccess::Execute),
                refused(&p(&data.join("a.csv")), FileAccess::Execute),
            ],
            refused_calls: Vec::new(),
            truncated: false,
        };
        let mut tried = BTreeSet::new();
        let (steps, skipped) = steps_from_report(&report, &mut tried, "compile", &Profile::strict());
        let described: Vec<String> = steps
            .iter()
            .map(|s| match s {
                Step::Read(root, _) => format!("read {}", root.display()),
                Step::Write(dir, _) => format!("write {}", dir.display()),
                Step::Program(p) => format!("exec {}", p.display()),
                Step::Library(..) | Step::Compile => "other".into(),
            })
            .collect();
        let data = data.canonicalize().unwrap();
        let out = out.canonicalize().unwrap();
        assert_eq!(
            described,
            vec![format!("read {}", data.display()), format!("write {}", out.display()), "exec /usr/bin/env".into()]
        );
        assert!(skipped.iter().any(|s| s.contains("/etc/passwd (the host's accounts)")), "{skipped:?}");
        assert!(skipped.iter().any(|s| s.contains("the directory / (too broad")), "{skipped:?}");
        assert!(!skipped.iter().any(|s| s.contains("/proc")), "kernel state is skipped quietly: {skipped:?}");
        // Each path is considered once.
        assert!(steps_from_report(&report, &mut tried, "compile", &Profile::strict()).0.is_empty());
        // Under a profile without programs, running one means learning under compile.
        let exec = LearningReport { refused_calls: vec!["execve".into()], ..LearningReport::default() };
        assert!(matches!(
            steps_from_report(&exec, &mut BTreeSet::new(), "strict", &Profile::strict()).0[..],
            [Step::Compile]
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn broad_directories_are_learned_file_by_file() {
        assert_eq!(read_root(Path::new("/etc/hostname")), Some(PathBuf::from("/etc/hostname")));
        assert_eq!(read_root(Path::new("/etc")), None);
        assert_eq!(read_root(Path::new("/")), None);
        assert_eq!(read_root(Path::new("/usr/share/zoneinfo")), Some(PathBuf::from("/usr/share/zoneinfo")));
        assert_eq!(never_learned(Path::new("/home/ada/.ssh/id_ed25519")), Some("a hidden file or directory"));
        assert_eq!(never_learned(Path::new("/srv/data/x.csv")), None);
        // Backups and companions of the account files, as name prefixes.
        for account in ["/etc/shadow-", "/etc/gshadow-", "/etc/passwd.bak", "/etc/sudoers.d/admins", "/etc/subuid"] {
            assert_eq!(never_learned(Path::new(account)), Some("the host's accounts"), "{account}");
        }
        assert_eq!(never_learned(Path::new("/etc/ssh/ssh_host_ed25519_key")), Some("the host's keys"));
        assert_eq!(
            never_learned(Path::new("/etc/grouping.conf")),
            Some("the host's accounts"),
            "prefix: err on the safe side"
        );
        assert_eq!(never_learned(Path::new("/etc/hostname")), None);
    }

    #[test]
    fn the_path_judged_is_the_path_learned() {
        // Written through `..` (or a link) into kernel state: judged where it leads.
        let report = LearningReport {
            refused_files: vec![
                refused("/usr/../dev/shm", FileAccess::Read),
                refused("/usr/../proc/self/status", FileAccess::Read),
                refused("/usr/../dev/null", FileAccess::Write),
            ],
            refused_calls: Vec::new(),
            truncated: false,
        };
        let (steps, skipped) = steps_from_report(&report, &mut BTreeSet::new(), "compile", &Profile::strict());
        assert!(steps.is_empty(), "kernel state learned: {:?}", steps.len());
        assert!(skipped.is_empty(), "skipped quietly: {skipped:?}");
    }
}
