//! Real Docker rows: a test runs a command in a container of the test environment image
//! (`tests/docker/Containerfile`, built by `scripts/docker-test-env.sh`) under Docker's
//! default seccomp profile, with the build's binaries and the workspace bind-mounted at
//! the same paths. Where no Docker Engine answers, the tests say so and pass: the
//! emulated container rows (`container.rs`) run everywhere.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Set inside the container, so a test binary run there knows it is the inner run.
pub const INSIDE: &str = "RSANDBOX_INSIDE_DOCKER";

/// The checkout's root (this crate's manifest dir, two levels up).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the workspace root")
}

/// Whether this process is the run inside the container.
pub fn inside() -> bool {
    std::env::var_os(INSIDE).is_some()
}

/// The test environment image, built on first use; `None` (with the reason printed)
/// where Docker is not available.
pub fn image() -> Option<&'static str> {
    static IMAGE: OnceLock<Option<String>> = OnceLock::new();
    IMAGE
        .get_or_init(|| {
            let info = Command::new("docker").args(["info", "--format", "{{.ServerVersion}}"]).output();
            match info {
                Ok(out) if out.status.success() => {}
                Ok(out) => {
                    println!("skipped: no Docker Engine answers: {}", String::from_utf8_lossy(&out.stderr).trim());
                    return None;
                }
                Err(e) => {
                    println!("skipped: no docker command: {e}");
                    return None;
                }
            }
            let out = Command::new(workspace_root().join("scripts/docker-test-env.sh"))
                .output()
                .expect("run scripts/docker-test-env.sh");
            assert!(
                out.status.success(),
                "building the Docker test image failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            Some(String::from_utf8(out.stdout).unwrap().trim().to_string())
        })
        .as_deref()
}

/// The directories a command in the container needs at their host paths: the
/// checkout (corpus, README) and the target directory (binaries, this test binary).
fn mounts() -> Vec<PathBuf> {
    let root = workspace_root();
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test binary>
    let target = exe.ancestors().nth(3).expect("the target dir").to_path_buf();
    let mut dirs = vec![root.clone()];
    if !target.starts_with(&root) {
        dirs.push(target);
    }
    dirs
}

/// `docker run --rm` of `image` with the mounts (read-only unless `writable`), Docker's
/// default seccomp profile, `docker_args` (identity, capabilities) and `command`.
pub fn docker_run(image: &str, docker_args: &[&str], writable: bool, command: &[&str]) -> Command {
    let mut c = Command::new("docker");
    c.args(["run", "--rm", "--network", "none"]);
    for dir in mounts() {
        let d = dir.display();
        c.arg("-v").arg(if writable { format!("{d}:{d}") } else { format!("{d}:{d}:ro") });
    }
    c.args(docker_args).arg(image).args(command);
    c
}

/// Run the named test of this test binary inside a container (`docker_args` set it
/// up), passing through `RSANDBOX_*` settings; its output is shown and its status
/// asserted. Returns false (after printing why) where Docker is not available.
pub fn run_test_inside(test: &str, docker_args: &[&str]) -> bool {
    let Some(image) = image() else { return false };
    let exe = std::env::current_exe().expect("the test binary's path");
    let writable = std::env::var_os("RSANDBOX_UPDATE_README").is_some();
    // The run's files (binaries, secrets, workspaces) on a tmpfs, as on a host's /tmp,
    // rather than the container's overlay, which is slow to create thousands of files in.
    // `--init`: the runner is not PID 1, which reaps what is orphaned in the container.
    let mut args: Vec<String> = vec!["--init".into(), "--tmpfs".into(), "/tmp:rw,exec,size=8g".into()];
    args.extend(docker_args.iter().map(|s| s.to_string()));
    args.extend(["-e".into(), format!("{INSIDE}=1")]);
    for (key, value) in std::env::vars().filter(|(k, _)| k.starts_with("RSANDBOX_") || k == "RUST_BACKTRACE") {
        args.extend(["-e".into(), format!("{key}={value}")]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let exe = exe.to_str().expect("a UTF-8 path");
    let out: Output = docker_run(image, &args, writable, &[exe, "--exact", test, "--nocapture", "--test-threads=1"])
        .output()
        .expect("run docker");
    println!("{}", String::from_utf8_lossy(&out.stdout));
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    // The inner run's panic message is repeated here: a CI log keeps the head and the
    // tail of a long output, and the inner message sits between the per-case table and
    // its backtrace.
    assert!(out.status.success(), "{test} failed inside Docker ({}):\n{}", out.status, inner_panic(&stderr));
    true
}

/// The message of the first panic in a test run's stderr, without its backtrace.
fn inner_panic(stderr: &str) -> &str {
    let Some(start) = stderr.find("panicked at ") else { return "(no panic message in its output)" };
    let message = &stderr[start..];
    let end = message.find("\nstack backtrace:").or_else(|| message.find("\nnote: run with")).unwrap_or(message.len());
    message[..end].trim_end()
}
