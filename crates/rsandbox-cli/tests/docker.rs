//! rsandbox in real Docker containers (Docker's default seccomp profile; the image of
//! `tests/docker/Containerfile` with this build's binaries mounted): what `check` says
//! and what an evaluation does as root with Docker's default capabilities, as root
//! with every capability dropped, and as an ordinary user with every capability
//! dropped, each with `no-new-privileges`. The attack corpus's Docker rows run in the
//! same image (`attacks.rs`). Passes, saying so, where no Docker Engine answers.

#[allow(dead_code)]
#[path = "common/docker.rs"]
mod docker;

use serde_json::Value;
use std::process::Output;

const CLI: &str = env!("CARGO_BIN_EXE_rsandbox");

/// `rsandbox ARGS` in a fresh container with `docker_args`; `None` without Docker.
fn rsandbox(docker_args: &[&str], args: &[&str]) -> Option<Output> {
    let image = docker::image()?;
    let mut command = vec![CLI];
    command.extend_from_slice(args);
    let mut docker_args = docker_args.to_vec();
    docker_args.extend(["--security-opt", "no-new-privileges", "-e", "RSANDBOX_NO_DAEMON=1"]);
    Some(docker::docker_run(image, &docker_args, false, &command).output().expect("run docker"))
}

fn text(out: &Output) -> String {
    format!(
        "\nexit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):{}", text(out)))
}

const ROOT: &[&str] = &[];
const ROOT_NO_CAPS: &[&str] = &["--cap-drop", "ALL"];
const USER_NO_CAPS: &[&str] = &["--user", "1000:1000", "--cap-drop", "ALL"];

/// Docker's profile refuses new namespaces: refused, naming `--no-namespaces`; with it,
/// every other layer holds, as root (its own uid per sandbox) and as a user.
#[test]
fn in_docker_namespaces_are_refused_and_every_other_layer_holds_without_them() {
    for (who, args) in [("root", ROOT), ("user", USER_NO_CAPS)] {
        let Some(out) = rsandbox(args, &["eval", "sum(1:10)"]) else { return };
        assert_eq!(out.status.code(), Some(11), "{who}: refused as a set-up failure:{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("namespaces") && stderr.contains("--no-namespaces"), "{who}: names it:{}", text(&out));

        let out = rsandbox(args, &["check", "--json", "--no-namespaces"]).unwrap();
        assert!(out.status.success(), "{who}:{}", text(&out));
        let layers = &json(&out)["evaluation"]["layers"];
        assert_eq!(layers["namespaces"], Value::Array(vec![]), "{who}:{}", text(&out));
        assert_eq!(layers["landlock"], "full", "{who}:{}", text(&out));
        assert_eq!(layers["seccomp"], true, "{who}:{}", text(&out));
        assert_eq!(layers["identity"].is_null(), who == "user", "root runs each sandbox as its own uid:{}", text(&out));

        let out = rsandbox(args, &["eval", "--no-namespaces", "sum(1:10)"]).unwrap();
        assert!(out.status.success(), "{who}:{}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "[1] 55\n", "{who}");

        let out = rsandbox(args, &["eval", "--no-namespaces", "--json", "system('id')"]).unwrap();
        assert_eq!(out.status.code(), Some(9), "{who}: a violation:{}", text(&out));
        assert_eq!(json(&out)["violation"]["syscall"], "execve", "{who}:{}", text(&out));
    }
}

/// Root with every capability dropped cannot give a sandbox a user of its own, and uid
/// 0's processes have no process limit: refused before anything runs, saying what to
/// change, with or without namespaces.
#[test]
fn in_docker_root_without_capabilities_is_refused_naming_what_to_change() {
    for extra in [&[][..], &["--no-namespaces"][..]] {
        let mut args = vec!["eval"];
        args.extend_from_slice(extra);
        args.push("sum(1:10)");
        let Some(out) = rsandbox(ROOT_NO_CAPS, &args) else { return };
        assert_eq!(out.status.code(), Some(11), "{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        for needle in ["CAP_SETUID", "--user", "--cap-add"] {
            assert!(stderr.contains(needle), "names {needle}:{}", text(&out));
        }
        assert!(!stderr.contains("chown"), "not a bare system call failure:{}", text(&out));
    }
}

/// Where the runtime allows user namespaces (here Docker with `seccomp=unconfined`, as
/// podman's default profile allows them): every layer, as an ordinary user and as root
/// without CAP_SYS_ADMIN (its sandbox uid first, then a user namespace). In a container
/// `/etc` has mounts under it (`/etc/hosts`, …), which a private root must cope with.
#[test]
fn in_docker_with_user_namespaces_allowed_every_layer_holds() {
    const UNCONFINED: &[&str] = &["--security-opt", "seccomp=unconfined"];
    for (who, identity) in [("root", ROOT), ("user", USER_NO_CAPS)] {
        let args: Vec<&str> = UNCONFINED.iter().chain(identity).copied().collect();
        let Some(out) = rsandbox(&args, &["eval", "--json", "c(file.create('x'), file.exists('/etc/hosts'))"]) else {
            return;
        };
        assert!(out.status.success(), "{who}:{}", text(&out));
        let j = json(&out);
        assert_eq!(
            j["value"],
            serde_json::json!([true, false]),
            "{who}: the workspace, and no /etc/hosts:{}",
            text(&out)
        );
        let layers = &j["layers"];
        assert_eq!(layers["namespaces"], serde_json::json!(["user", "net", "ipc", "uts"]), "{who}:{}", text(&out));
        assert_eq!(layers["private_root"], true, "{who}:{}", text(&out));
        assert!(layers["workspace_quota"].as_u64().is_some(), "{who}:{}", text(&out));
        assert_eq!(layers["identity"].is_null(), who == "user", "{who}:{}", text(&out));
        let out = rsandbox(&args, &["eval", "--json", "system('id')"]).unwrap();
        assert_eq!(out.status.code(), Some(9), "{who}: a violation:{}", text(&out));
    }
    // A mount under a read-only tree (docker-init under /usr/sbin with `--init`):
    // overlayfs refuses to overlay /usr there; the sandbox fails closed and says why.
    let args: Vec<&str> = UNCONFINED.iter().chain(&["--init"]).copied().collect();
    let out = rsandbox(&args, &["eval", "1"]).unwrap();
    assert_eq!(out.status.code(), Some(11), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("/usr") && stderr.contains("--init") && stderr.contains("--no-namespaces"),
        "{}",
        text(&out)
    );
}

/// `rsandbox exec` in a container, root and user: under Docker's profile with
/// `--no-namespaces`; where user namespaces are allowed, with every layer (a violation
/// still ends a second exec); and as root with `CAP_SYS_ADMIN`, which may make and join
/// namespaces itself, through the pinned private root and namespaces, twice in one
/// container (the second call copies what the first pinned).
#[test]
fn in_docker_exec_runs_its_program_under_every_layer_the_container_allows() {
    const UNCONFINED: &[&str] = &["--security-opt", "seccomp=unconfined"];
    for (who, identity) in [("root", ROOT), ("user", USER_NO_CAPS)] {
        let Some(out) = rsandbox(identity, &["exec", "--no-namespaces", "--", "/bin/sh", "-c", "echo hi"]) else {
            return;
        };
        assert!(out.status.success(), "{who}:{}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n", "{who}:{}", text(&out));
        let args: Vec<&str> = UNCONFINED.iter().chain(identity).copied().collect();
        let out = rsandbox(&args, &["exec", "--", "/bin/sh", "-c", "echo hi"]).unwrap();
        assert!(out.status.success(), "{who}:{}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n", "{who}:{}", text(&out));
        let out = rsandbox(&args, &["exec", "--json", "--", "/bin/sh", "-c", "/bin/ls"]).unwrap();
        assert_eq!(out.status.code(), Some(9), "{who}: a violation:{}", text(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains(r#""violation":"execve""#), "{who}:{}", text(&out));
    }
    let image = docker::image().expect("checked above");
    let twice = format!("{CLI} exec -- /bin/pwd && {CLI} exec -- /bin/pwd && ls /run/rsandbox-ns");
    let args = ["--security-opt", "seccomp=unconfined", "--cap-add", "SYS_ADMIN", "-e", "RSANDBOX_NO_DAEMON=1"];
    let out = docker::docker_run(image, &args, false, &["/bin/sh", "-c", &twice]).output().expect("run docker");
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines.len() > 2 && lines[..2].iter().all(|l| l.starts_with("/dev/shm/rsandbox-exec-workspaces/ws-")),
        "both in the shared workspace directory:{}",
        text(&out)
    );
    assert_ne!(lines[0], lines[1], "each call a workspace of its own:{}", text(&out));
    let pins = lines[2..].iter().filter(|l| l.starts_with("root-") && !l.ends_with(".shape")).count();
    assert_eq!(pins, 1, "one template pinned, and copied by the second call:{}", text(&out));
}
