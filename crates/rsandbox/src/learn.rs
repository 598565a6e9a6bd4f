//! Learning a profile (`rsandbox learn FILE.R`): run trusted code in the sandbox and
//! write down what it needed, as a profile that lets it run (RAppArmor's "complain"
//! mode, without strace or the kernel's audit log).
//!
//! How it observes: the code runs in a session of a sandbox under the profile learned
//! so far. When it fails on a host file it could not open, the file's directory is added
//! to `read` and the code runs again (a file it could not create in an existing host
//! directory adds that directory to `write`, kept only if the next run creates it); a package that is not there is looked for in the
//! caller's own R libraries and that library added. Code that runs a program (the
//! sandbox is ended for `execve`) is learned again under the `compile` profile; a
//! program that profile does not list (the shell says `NAME: Permission denied`) is
//! added to `exec`. What R loaded, and the peak of time, CPU and memory, come from the
//! successful run. What a profile cannot grant (network, writing outside the workspace,
//! other forbidden calls) ends the learning with a note naming it. Only what R and the
//! shell report is seen: a file native code fails to open without saying so is not
//! learned.

use crate::errors::EngineError;
use crate::options::{EngineConfig, EvalOptions};
use crate::profile::Profile;
use crate::result::{EvalResult, Outcome};
use crate::session::ExecuteOptions;
use crate::Engine;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
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
    let mut extends = if ["base", "compile"].contains(&profile.name.as_str()) { profile.name.clone() } else { "strict".to_string() };
    let mut exec: Vec<PathBuf> = Vec::new();
    let mut notes = Vec::new();
    let mut tried: BTreeSet<String> = BTreeSet::new();
    // A directory added to `write` on the guess that the code creates this file there.
    let mut guessed_write: Option<(PathBuf, String)> = None;
    for round in 1..=MAX_ROUNDS {
        let engine = Engine::start(EngineConfig { profile: profile.clone(), warm: false, prefork: 0, ..config.clone() })?;
        let session = engine.session(options.clone(), Vec::new())?;
        let run = ExecuteOptions { timeout: options.timeout, max_output: options.max_output, ..ExecuteOptions::default() };
        let result = session.execute(code, &run)?;
        // The guess holds only if the file now exists on the host.
        if let Some((dir, file)) = guessed_write.take() {
            if !Path::new(&file).exists() {
                notes.push(format!(
                    "round {round}: {file} was still not written with write = {}: removed again (a file the code \
                     reads but that does not exist, or a directory the sandbox's uid may not write: as root each \
                     sandbox has a uid of its own, so give it mode 1777 or use --uid)",
                    dir.display()
                ));
                profile.write.retain(|w| *w != dir);
            }
        }
        // A program the shell could not run need not fail the code (`system()` returns
        // its status): run again with it.
        let refused = (result.outcome == Outcome::Ok && extends == "compile")
            .then(|| refused_program(&failure_text(&result)))
            .flatten()
            .filter(|p| !tried.contains(&p.display().to_string()));
        if let (Outcome::Ok, None) = (result.outcome, &refused) {
            let loaded = session.execute("sort(loadedNamespaces())", &ExecuteOptions::default())?;
            // A package allowlist needs the private root: without namespaces, none.
            let packages = if config.namespaces { loaded_packages(&loaded.value) } else { Vec::new() };
            notes.push(format!("ran to the end in round {round}"));
            return Ok(Learned {
                read: profile.read.clone(),
                libraries: profile.libraries.clone(),
                extends,
                exec,
                write: profile.write.clone(),
                packages,
                limits: suggest(&result),
                notes,
                last: result,
                succeeded: true,
            });
        }
        let text = failure_text(&result);
        let step = match refused.map(Step::Program).or_else(|| next_step(&result, &text, &tried, &extends)) {
            Some(step) => step,
            None => {
                notes.push(why_not(&result, &text));
                return Ok(Learned {
                    read: profile.read.clone(),
                    libraries: profile.libraries.clone(),
                    extends,
                    exec,
                    write: profile.write.clone(),
                    packages: Vec::new(),
                    limits: SuggestedLimits::default(),
                    notes,
                    last: result,
                    succeeded: false,
                });
            }
        };
        match step {
            Step::Write(dir, file) => {
                notes.push(format!("round {round}: it could not create {file}; added write = {} (review: the sandbox may write anything there)", dir.display()));
                tried.insert(file.clone());
                profile.write.push(dir.clone());
                guessed_write = Some((dir, file));
            }
            Step::Read(dir, file) => {
                notes.push(format!("round {round}: it opened {file}; added read = {} (review: every file there becomes readable)", dir.display()));
                tried.insert(file);
                profile.read.push(dir);
            }
            Step::Library(library, package) => {
                notes.push(format!("round {round}: package {package} is in {}; added it to libraries", library.display()));
                tried.insert(package);
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
                tried.insert(program.display().to_string());
                profile.exec.push(program.clone());
                exec.push(program);
            }
        }
    }
    Err(EngineError::Setup(format!("learning did not converge in {MAX_ROUNDS} runs")))
}

enum Step {
    Read(PathBuf, String),
    /// A directory to make writable, for the file the code could not create there.
    Write(PathBuf, String),
    Library(PathBuf, String),
    /// Learn on under the `compile` profile.
    Compile,
    /// A program to add to `exec`.
    Program(PathBuf),
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

/// What to add for the next run, if the failure says.
fn next_step(result: &EvalResult, text: &str, tried: &BTreeSet<String>, extends: &str) -> Option<Step> {
    let exec_violation = result.violation.as_ref().is_some_and(|v| v.syscall == "execve" || v.syscall == "execveat");
    if result.outcome == Outcome::Violation && exec_violation && extends != "compile" {
        return Some(Step::Compile);
    }
    if result.outcome != Outcome::Error {
        return None;
    }
    if extends == "compile" {
        if let Some(program) = refused_program(text).filter(|p| !tried.contains(&p.display().to_string())) {
            return Some(Step::Program(program));
        }
    }
    if let Some(package) = quoted_after(text, "there is no package called ") {
        if !tried.contains(&package) {
            if let Some(library) = crate::profile::user_libraries().into_iter().find(|l| l.join(&package).join("DESCRIPTION").is_file()) {
                return Some(Step::Library(library, package));
            }
        }
        return None;
    }
    for marker in ["cannot open file ", "cannot open compressed file ", "cannot open "] {
        if let Some(file) = quoted_after(text, marker) {
            let path = Path::new(&file);
            // Only host paths that exist: a relative path is the workspace's (pass it with
            // the code), and a path that exists nowhere is the code's own error.
            if path.is_absolute() && path.exists() && !tried.contains(&file) {
                let dir = if path.is_dir() { path.to_path_buf() } else { path.parent()?.to_path_buf() };
                return Some(Step::Read(dir, file));
            }
            // A file that does not exist in a host directory that does: the code meant to
            // create it (or read a file that is not there: the next run tells).
            let parent = path.parent().filter(|p| p.is_dir() && crate::profile::writable_dir(p).is_ok());
            if let (true, Some(dir)) = (path.is_absolute() && !path.exists() && !tried.contains(&file), parent) {
                return Some(Step::Write(dir.to_path_buf(), file));
            }
        }
    }
    None
}

/// A program the shell could not run for want of the execute right: `sh: 1: NAME:
/// Permission denied` (dash) or `bash: NAME: Permission denied`, with NAME found in
/// `/usr/bin` or `/bin` (only a program of the system, never a path the code chose).
fn refused_program(text: &str) -> Option<PathBuf> {
    for line in text.lines() {
        let Some(head) = line.strip_suffix(": Permission denied") else { continue };
        let name = head.rsplit(": ").next()?.trim();
        if name.is_empty() || name.contains('/') || !name.chars().all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c)) {
            continue;
        }
        if let Some(found) = ["/usr/bin", "/bin"].iter().map(|d| Path::new(d).join(name)).find(|p| p.is_file()) {
            return found.canonicalize().ok();
        }
    }
    None
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
        Outcome::Error => format!("stopped: the code failed with an error learning cannot fix: {}", text.lines().next().unwrap_or("")),
        other => format!("stopped: {} (raise the limit with --timeout, --memory, --cpu)", other.name()),
    }
}

/// Packages beyond R's base set, from `sort(loadedNamespaces())`.
fn loaded_packages(value: &serde_json::Value) -> Vec<String> {
    let base = crate::profile::BASE_PACKAGES;
    match value {
        serde_json::Value::Array(items) => items.iter().filter_map(|v| v.as_str()).filter(|p| !base.contains(p)).map(str::to_string).collect(),
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
        if self.succeeded {
            let l = &self.limits;
            out.push_str(&format!("\n[limits]\ntimeout = {}\ncpu = {}\nmemory = \"{}M\"\n", l.timeout, l.cpu, l.memory_mib));
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
        assert_eq!(quoted_after("cannot open file '/srv/x.csv': No such file", "cannot open file ").as_deref(), Some("/srv/x.csv"));
        assert_eq!(quoted_after("there is no package called ‘tinypkg’", "there is no package called ").as_deref(), Some("tinypkg"));
        assert_eq!(quoted_after("cannot open file \"a b\"", "cannot open file ").as_deref(), Some("a b"));
        assert_eq!(quoted_after("nothing here", "cannot open file "), None);
    }
}
