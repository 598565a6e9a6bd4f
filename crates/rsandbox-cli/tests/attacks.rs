//! The adversarial corpus (`tests/attacks/`, see its README.md), run through the
//! `rsandbox` binary as root and as an unprivileged user, and calibrated unsandboxed.
//!
//! Needs root, R, a C compiler, `unshare`, and both binaries: run `cargo build
//! --workspace` first, then `cargo test -p rsandbox-cli --test attacks -- --nocapture`
//! to see the per-case tables. `RSANDBOX_ATTACK_FILTER=network,exec/system` runs the
//! cases whose names contain one of the comma-separated parts; `RSANDBOX_ATTACK_WORKERS`
//! sets the parallelism (default 3).

mod attacks_support;
#[allow(dead_code)]
#[path = "common/docker.rs"]
mod docker;
#[path = "common/engine_dirs.rs"]
mod engine_dirs;

use attacks_support::*;

fn corpus(mode: Mode) {
    let _serial = RUN_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (reports, global) = run_corpus(mode);
    assert_clean(mode, &reports, &global);
    // The README's matrix row, from a full run only.
    let filtered = std::env::var("RSANDBOX_ATTACK_FILTER").is_ok_and(|f| !f.is_empty());
    if mode != Mode::Calibration && !filtered {
        check_matrix_row(mode, &reports);
    }
}

/// The headers alone: every file parses, and the corpus covers what it must.
#[test]
fn attack_corpus_headers() {
    let cases = load_corpus();
    let count = |cat: &str| cases.iter().filter(|c| c.category == cat).count();
    let mut summary = String::new();
    for cat in CATEGORIES {
        summary.push_str(&format!("{cat}: {}  ", count(cat)));
    }
    println!("{} cases: {summary}", cases.len());
    assert!(cases.len() >= 150, "the corpus has {} cases; it needs at least 150", cases.len());
    assert!(count("legit") >= 20, "only {} legitimate cases; at least 20 are needed", count("legit"));
    for cat in CATEGORIES {
        assert!(count(cat) > 0, "no case in category {cat}");
    }
}

#[test]
fn attack_corpus_as_root() {
    corpus(Mode::Root);
}

#[test]
fn attack_corpus_as_user() {
    corpus(Mode::User);
}

/// Under a container runtime's default seccomp profile, with `--no-namespaces`: the
/// layers that remain (Landlock, seccomp, rlimits, the uid drop as root) must hold every
/// case, except where a case's header says what this mode cannot hold and why.
#[test]
fn attack_corpus_in_container_as_root() {
    corpus(Mode::ContainerRoot);
}

#[test]
fn attack_corpus_in_container_as_user() {
    corpus(Mode::ContainerUser);
}

/// In a real Docker container (Docker's default seccomp profile, `no-new-privileges`)
/// as root with Docker's default capabilities, with `--no-namespaces`: this test binary
/// runs itself in the container, where the same test runs the corpus. Passes, saying
/// so, where no Docker Engine answers.
#[test]
fn attack_corpus_in_docker_as_root() {
    in_docker(Mode::DockerRoot, "attack_corpus_in_docker_as_root");
}

/// As `attack_corpus_in_docker_as_root`, the CLI as an unprivileged user (no
/// capabilities, as `docker run --user … --cap-drop ALL` gives).
#[test]
fn attack_corpus_in_docker_as_user() {
    in_docker(Mode::DockerUser, "attack_corpus_in_docker_as_user");
}

fn in_docker(mode: Mode, test: &str) {
    if docker::inside() {
        corpus(mode);
    } else {
        // The runner is root in the container (it plants secrets and switches users)
        // and reads the sandboxes' /proc entries (CAP_SYS_PTRACE, which the CLI it
        // starts does not get: `Mode::enter`). Docker's profile allows a few more calls
        // with that capability (process_vm_readv/writev, kcmp, pidfd_getfd,
        // process_madvise); rsandbox's own seccomp program refuses each of them.
        docker::run_test_inside(test, &["--security-opt", "no-new-privileges", "--cap-add", "SYS_PTRACE"]);
    }
}

/// On a kernel without Landlock, with `--best-effort`: the private root, seccomp and the
/// uid drop must hold every case.
#[test]
fn attack_corpus_without_landlock_as_root() {
    corpus(Mode::NoLandlockRoot);
}

/// Where user namespaces are refused, an unprivileged user runs with `--no-namespaces`.
#[test]
fn attack_corpus_without_user_namespaces_as_user() {
    corpus(Mode::NoUserNamespacesUser);
}

/// In a chroot whose `/` is not a mount point, with `--no-namespaces`.
#[test]
fn attack_corpus_in_chroot_as_root() {
    corpus(Mode::ChrootRoot);
}

/// Under the built-in `base` profile: everything `strict` holds.
#[test]
fn attack_corpus_under_the_base_profile_as_root() {
    corpus(Mode::BaseProfileRoot);
}

/// Under the built-in `compile` profile, where the toolchain may run: the cases that run
/// a program it does not list (or one of their own), or reach through a listed one what
/// no program may, must still fail.
#[test]
fn attack_corpus_under_the_compile_profile_as_root() {
    corpus(Mode::CompileProfileRoot);
}

#[test]
fn attack_corpus_calibration() {
    corpus(Mode::Calibration);
}
