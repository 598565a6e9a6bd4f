//! `eval` and `run`: one evaluation (through the daemon when there is one), its inputs,
//! outputs and plots on the host, and batches of files.
//!
//! Paths that come back from the sandbox (`--output`) are checked before anything is
//! written: relative, plain components, no symlink on the way in the output directory.

use crate::{daemon, print_like_rscript, read_source, EngineArgs, LimitArgs, EXIT_BAD_INPUT, EXIT_SETUP_FAILED};
use anyhow::Context;
use base64::Engine as _;
use rsandbox::{EngineConfig, EvalRequest, EvalResult, InputError};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

// Files in, files out, plots. (A plain comment: with the subcommands deferred, a doc
// comment here would become the `about` of every subcommand that flattens it.)
#[derive(clap::Args, Clone, Default)]
pub struct IoArgs {
    /// Copy a file or directory into the workspace under its base name (repeatable).
    #[arg(long = "input", value_name = "PATH")]
    inputs: Vec<PathBuf>,
    /// After the run, copy the workspace's regular files into DIR (no symlinks followed;
    /// at most --max-output bytes in all).
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Without --json, write plots here as Rplot001.png, … (default: the current directory).
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
}

/// What one evaluation needs besides limits.
pub struct Job {
    pub code: String,
    pub files: Vec<(String, Vec<u8>)>,
    pub collect: Vec<String>,
    pub args: Vec<String>,
}

impl Job {
    pub fn code(code: String) -> Job {
        Job { code, files: Vec::new(), collect: Vec::new(), args: Vec::new() }
    }
}

/// Largest request the daemon takes in one line (its protocol allows 16 MiB).
const MAX_DAEMON_REQUEST: usize = 12 << 20;

/// Evaluate one job; print like Rscript or as JSON; the exit status.
pub fn one(mut job: Job, limits: &LimitArgs, engine: &EngineArgs, io: &IoArgs, json: bool) -> anyhow::Result<u8> {
    let options = limits.options(&engine.profile())?;
    // Validate before starting R: bad input costs nothing.
    rsandbox::options::validate_code(&job.code)?;
    options.validate()?;
    for input in &io.inputs {
        read_input(input, &mut job.files)?;
    }
    if io.output.is_some() {
        job.collect = vec!["*".into(), "**/*".into()];
    }
    let request_bytes = job.code.len() + job.files.iter().map(|(_, d)| d.len() * 4 / 3).sum::<usize>();
    let use_daemon = !engine.no_daemon
        && std::env::var_os("RSANDBOX_NO_DAEMON").is_none_or(|v| v.is_empty() || v == "0")
        && request_bytes < MAX_DAEMON_REQUEST;
    let Job { code, files, collect, args } = job;
    let mut request = EvalRequest::new(&code, options.clone());
    (request.files, request.collect, request.args) = (files, collect, args);
    let key = daemon::DaemonKey::for_config(&engine.config()).filter(|_| use_daemon);
    let answer = match key.map(|key| daemon::eval(&key, &request)) {
        None | Some(Ok(None)) => None,
        Some(Ok(Some(answer))) => Some(answer),
        Some(Err(why)) => {
            eprintln!("rsandbox: evaluating without the daemon: {why}");
            None
        }
    };
    let mut result = match answer {
        Some(daemon::Answer::Result(result)) => *result,
        Some(daemon::Answer::Refused(error)) => {
            eprintln!("rsandbox: {}", crate::terminal::inert_on_stderr(&crate::with_remedy(error.message)));
            // The one mapping of an error code to an exit status, as every front's.
            return Ok(error.code.exit_code());
        }
        None => {
            // One fork only: warming the zygote for fast later forks would be wasted here.
            let engine = rsandbox::Engine::start(EngineConfig { warm: false, ..engine.config() })?;
            engine.eval_request(request)?
        }
    };
    if let Some(dir) = &io.output {
        write_outputs(dir, &result)?;
        if result.files_truncated {
            eprintln!(
                "rsandbox: --output: not every file was copied (over --max-output in all, or more than 10000 files)"
            );
        }
        // Written to disk: not repeated in the printed result.
        result.files.clear();
    }
    if json {
        out!("{}", serde_json::to_string(&result)?);
    } else {
        write_plots(io.plots.as_deref().unwrap_or(Path::new(".")), &result)?;
        print_like_rscript(&result, &options)?;
    }
    Ok(exit_status(&result))
}

fn exit_status(result: &EvalResult) -> u8 {
    if result.syntax_error.is_some() {
        EXIT_BAD_INPUT
    } else {
        result.outcome.exit_code().clamp(0, 255) as u8
    }
}

/// A host file or directory (recursively, regular files only) into `files`, under its
/// base name. The path given is followed; a symbolic link *inside* a directory is
/// refused (bad input naming it): a submission's link to a grader's file would
/// otherwise bring that file into the sandbox. Every entry is opened `O_NOFOLLOW`, so a
/// file swapped for a link after the listing is refused too.
fn read_input(path: &Path, files: &mut Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .context(format!("--input {}: no usable file name", path.display()))?;
    let refuse = |host: &Path, reason: String| InputError::File { path: host.display().to_string(), reason };
    let mut stack = vec![(path.to_path_buf(), name.to_string(), true)];
    while let Some((host, inside, given)) = stack.pop() {
        let meta = if given { std::fs::metadata(&host) } else { std::fs::symlink_metadata(&host) }
            .map_err(|e| refuse(&host, e.to_string()))?;
        if meta.file_type().is_symlink() {
            let reason = format!(
                "a symbolic link inside --input {}: links are not copied into the sandbox (copy what it points to instead)",
                path.display()
            );
            return Err(refuse(&host, reason).into());
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&host)? {
                let entry = entry?;
                let child = entry.file_name().to_string_lossy().into_owned();
                stack.push((entry.path(), format!("{inside}/{child}"), false));
            }
        } else if meta.is_file() {
            let flags = if given { 0 } else { libc::O_NOFOLLOW };
            let mut data = Vec::new();
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(flags)
                .open(&host)
                .and_then(|mut f| f.read_to_end(&mut data))
                .map_err(|e| refuse(&host, e.to_string()))?;
            files.push((inside, data));
        }
    }
    Ok(())
}

/// The collected workspace files into `dir`, refusing any path that is not plain or
/// that would go through a symlink in `dir`.
fn write_outputs(dir: &Path, result: &EvalResult) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create --output {}", dir.display()))?;
    for file in &result.files {
        let parts = wire::names::workspace_path(&file.path).map_err(anyhow::Error::msg)?;
        let mut target = dir.to_path_buf();
        for part in &parts[..parts.len() - 1] {
            target.push(part);
            match std::fs::symlink_metadata(&target) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => anyhow::bail!("--output: {} exists and is not a directory", target.display()),
                Err(_) => {
                    std::fs::create_dir(&target).with_context(|| format!("cannot create {}", target.display()))?
                }
            }
        }
        target.push(parts[parts.len() - 1]);
        let data = base64::engine::general_purpose::STANDARD.decode(&file.data_base64)?;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&target)
            .with_context(|| format!("cannot write {}", target.display()))?;
        out.write_all(&data)?;
    }
    Ok(())
}

/// Plots as `Rplot001.png`, … in `dir`, as an Rscript user expects files to appear.
fn write_plots(dir: &Path, result: &EvalResult) -> anyhow::Result<()> {
    if result.plots.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create --plots {}", dir.display()))?;
    for (i, plot) in result.plots.iter().enumerate() {
        let path = dir.join(format!("Rplot{:03}.png", i + 1));
        let data = base64::engine::general_purpose::STANDARD.decode(&plot.data_base64)?;
        std::fs::write(&path, data).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// The R files of a batch: files as given, directories' `*.R` files sorted.
fn batch_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "R" || e == "r"))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    anyhow::ensure!(!files.is_empty(), InputError::File { path: "(batch)".into(), reason: "no R files".into() });
    Ok(files)
}

/// `run --jobs N a.R b.R dir/`: each file in its own fresh sandbox from one engine that
/// keeps N children ready; a line per file as each finishes; the worst exit status.
pub fn batch(
    paths: &[PathBuf],
    args: &[String],
    jobs: Option<usize>,
    shard: Option<crate::shard::Shard>,
    limits: &LimitArgs,
    engine: &EngineArgs,
    json: bool,
) -> anyhow::Result<u8> {
    let options = limits.options(&engine.profile())?;
    options.validate()?;
    let files = batch_files(paths)?;
    let files = match shard {
        Some(shard) => shard.select(files),
        None => files,
    };
    if files.is_empty() {
        // An array larger than the directory: this part has nothing to do.
        return Ok(0);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = jobs.unwrap_or(cores).clamp(1, 64);
    let engine = rsandbox::Engine::start(EngineConfig { prefork: jobs, ..engine.config() })?;
    let progress = indicatif::ProgressBar::new(files.len() as u64);
    progress.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} files {elapsed}").expect("a valid template"),
    );
    if json {
        // A JSON consumer reads stdout; the bar would only be noise on its stderr.
        progress.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let queue =
        Arc::new(Mutex::new(files.into_iter().enumerate().collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>()));
    let worst = Arc::new(Mutex::new(0u8));
    let workers: Vec<_> = (0..jobs)
        .map(|_| {
            let (queue, worst, engine, options, progress) =
                (queue.clone(), worst.clone(), engine.clone(), options.clone(), progress.clone());
            let args = args.to_vec();
            std::thread::spawn(move || loop {
                let Some((_, file)) = queue.lock().expect("queue").pop() else { return };
                let (line, status) = batch_one(&engine, &file, &options, &args, json);
                progress.suspend(|| println!("{line}"));
                progress.inc(1);
                let mut worst = worst.lock().expect("worst");
                *worst = (*worst).max(status);
            })
        })
        .collect();
    for worker in workers {
        worker.join().map_err(|_| anyhow::anyhow!("a batch worker panicked"))?;
    }
    progress.finish_and_clear();
    let worst = *worst.lock().expect("worst");
    Ok(worst)
}

/// One file of a batch: its output line and exit status.
fn batch_one(
    engine: &rsandbox::Engine,
    file: &Path,
    options: &rsandbox::EvalOptions,
    args: &[String],
    json: bool,
) -> (String, u8) {
    let name = file.display().to_string();
    let evaluated = read_source(&file.to_path_buf()).and_then(|code| {
        let mut request = EvalRequest::new(&code, options.clone());
        request.args = args.to_vec();
        Ok(engine.eval_request(request)?)
    });
    match evaluated {
        Ok(result) => {
            let status = exit_status(&result);
            let line = if json {
                let mut value = serde_json::to_value(&result).unwrap_or_default();
                value["file"] = serde_json::Value::String(name);
                // What this file alone would exit with: merging shards' lines gives the
                // batch's worst without rerunning anything.
                value["exit_status"] = status.into();
                value.to_string()
            } else {
                // The message is the sandbox's text.
                let tty = crate::terminal::Terminals::detect().stdout;
                let detail = result
                    .error
                    .as_ref()
                    .map(|e| format!(": {}", crate::terminal::inert(&e.message, tty)))
                    .unwrap_or_default();
                format!("{name}: {} ({} ms){detail}", result.outcome.name(), result.usage.wall_ms)
            };
            (line, status)
        }
        Err(e) => {
            let input = e.downcast_ref::<InputError>().is_some()
                || matches!(e.downcast_ref::<rsandbox::EngineError>(), Some(rsandbox::EngineError::Input(_)));
            let status = if input { EXIT_BAD_INPUT } else { EXIT_SETUP_FAILED };
            let line = if json {
                serde_json::json!({"file": name, "error": format!("{e:#}"), "exit_status": status}).to_string()
            } else {
                format!("{name}: not run: {e:#}")
            };
            (line, status)
        }
    }
}
