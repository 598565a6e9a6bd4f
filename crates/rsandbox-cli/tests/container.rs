//! rsandbox under a container runtime's default seccomp profile (no new namespaces, no
//! mounts), emulated on this machine by installing that profile before exec
//! (`common::in_container_default`), as root and as an unprivileged user.

#[macro_use]
mod common;

use common::*;
use serde_json::{json, Value};

fn eval_in_container(who: Who, extra: &[&str], code: &str) -> (Output, Value) {
    let mut args = vec!["eval", "--json"];
    args.extend_from_slice(extra);
    args.push(code);
    let out = rsandbox_in(Place::ContainerDefault, who, &args, &[], None);
    let json = if out.stdout.trim().is_empty() { Value::Null } else { out.json() };
    (out, json)
}

both!(
    fn refused_namespaces_fail_closed_and_name_the_option(who) {
        let _g = shared();
        let (out, _) = eval_in_container(who, &[], "1 + 1");
        out.assert_code(11);
        assert!(out.stderr.contains("namespace"), "names the missing layer:{out}");
        assert!(out.stderr.contains("--no-namespaces"), "names the option:{out}");
        assert!(!out.stderr.contains("EngineConfig"), "no Rust API in a CLI user's error:{out}");
    }
);

both!(
    fn without_namespaces_every_other_layer_holds(who) {
        let _g = shared();
        for flag in ["--no-namespaces", "--best-effort"] {
            let code = concat!(
                "c(readable = !inherits(try(readLines('/etc/passwd'), silent = TRUE), 'try-error'),",
                "  socket = !inherits(try(socketConnection('127.0.0.1', 1, timeout = 1), silent = TRUE), 'try-error'),",
                "  write_tmp = file.create('/tmp/rsandbox-container-test'),",
                "  write_ws = file.create('x'))"
            );
            let (out, j) = eval_in_container(who, &[flag], code);
            assert_outcome(&out, &j, "ok", 0);
            assert_eq!(j["value"], json!({"readable": false, "socket": false, "write_tmp": false, "write_ws": true}), "{flag}:{out}");
            let layers = &j["layers"];
            assert_eq!(layers["namespaces"], json!([]), "{flag}:{out}");
            assert_eq!(layers["private_root"], json!(false), "{flag}:{out}");
            assert_eq!(layers["workspace_quota"], Value::Null, "the quota is not enforced, and says so ({flag}):{out}");
            assert_eq!(layers["landlock"], "full", "{flag}:{out}");
            assert_eq!(layers["seccomp"], json!(true), "{flag}:{out}");
            if who == Who::Root {
                assert!(layers["identity"]["uid"].as_u64().unwrap() >= 2_000_000_000, "root still drops to its own uid:{out}");
            }
            let (out, j) = eval_in_container(who, &[flag], "system('id')");
            assert_outcome(&out, &j, "violation", 9);
            assert_eq!(j["violation"]["syscall"], "execve");
        }
    }
);

both!(
    /// `learn` under a container runtime's seccomp profile (with `--no-namespaces`): the
    /// supervisor still reads the paths the sandbox was refused.
    fn learn_sees_refused_files_in_a_container(who) {
        let _g = shared();
        let dir = owned_dir(who, "container-learn");
        let data = dir.join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("n.txt"), "seen\n").unwrap();
        let script = dir.join("job.R");
        std::fs::write(&script, format!("suppressWarnings(tryCatch(readLines('{}/n.txt'), error = function(e) 'none'))", data.display())).unwrap();
        set_modes(&[(&dir, 0o755), (&data, 0o755), (&data.join("n.txt"), 0o644), (&script, 0o644)]);
        let out = rsandbox_in(Place::ContainerDefault, who, &["learn", "--no-namespaces", script.to_str().unwrap()], &[], None);
        out.assert_code(0);
        assert!(out.stdout.contains(&format!("read = [\"{}\"]", data.display())), "{out}");
        std::fs::remove_dir_all(&dir).ok();
    }
);

both!(
    fn check_says_what_an_evaluation_gets(who) {
        let _g = shared();
        let out = rsandbox_in(Place::ContainerDefault, who, &["check", "--json"], &[], None);
        out.assert_code(1);
        let j = out.json();
        assert_eq!(j["evaluation"]["runs"], json!(false), "{out}");
        assert!(j["evaluation"]["error"].as_str().unwrap().contains("--no-namespaces"), "{out}");
        assert_eq!(j["strict_policy_possible"], json!(false), "{out}");

        let out = rsandbox_in(Place::ContainerDefault, who, &["check", "--json", "--no-namespaces"], &[], None);
        out.assert_code(0);
        let checked = out.json()["evaluation"]["layers"].clone();
        let (eval_out, evaluated) = eval_in_container(who, &["--no-namespaces"], "1");
        assert_outcome(&eval_out, &evaluated, "ok", 0);
        for layer in ["namespaces", "private_root", "workspace_quota", "landlock", "seccomp"] {
            assert_eq!(checked[layer], evaluated["layers"][layer], "check and an evaluation agree on {layer}:{out}{eval_out}");
        }
        // On the host the same check finds every layer.
        let host = rsandbox(who, &["check", "--json"]);
        host.assert_code(0);
        assert_eq!(host.json()["strict_policy_possible"], json!(true), "{host}");
    }
);

// =======================================================================================
// The other rows of the environment matrix: no Landlock, no user namespaces, a chroot.
// =======================================================================================

fn eval_in(place: Place, who: Who, extra: &[&str], code: &str) -> (Output, Value) {
    let mut args = vec!["eval", "--json"];
    args.extend_from_slice(extra);
    args.push(code);
    let out = rsandbox_in(place, who, &args, &[], None);
    let json = if out.stdout.trim().is_empty() { Value::Null } else { out.json() };
    (out, json)
}

/// In a weaker environment: refused by default with the missing layer and the option
/// named; with the option, the evaluation runs, holds what it still can, and `check`
/// reports exactly the layers the evaluation reports.
fn refused_then_runs_with(place: Place, who: Who, option: &str, missing: &str) -> Value {
    let (out, _) = eval_in(place, who, &[], "1 + 1");
    out.assert_code(11);
    assert!(out.stderr.contains(missing), "names the missing layer ({missing}):{out}");
    assert!(out.stderr.contains(option), "names the option ({option}):{out}");
    let refused = rsandbox_in(place, who, &["check", "--json"], &[], None);
    refused.assert_code(1);
    assert_eq!(refused.json()["evaluation"]["runs"], json!(false), "{refused}");
    assert_eq!(refused.json()["strict_policy_possible"], json!(false), "{refused}");

    let code = concat!(
        "c(passwd = !inherits(try(readLines('/etc/passwd'), silent = TRUE), 'try-error'),",
        "  socket = !inherits(try(socketConnection('127.0.0.1', 1, timeout = 1), silent = TRUE), 'try-error'),",
        "  write_ws = file.create('x'))"
    );
    let (out, j) = eval_in(place, who, &[option], code);
    assert_outcome(&out, &j, "ok", 0);
    assert_eq!(j["value"], json!({"passwd": false, "socket": false, "write_ws": true}), "{out}");
    let (violation, v) = eval_in(place, who, &[option], "system('id')");
    assert_outcome(&violation, &v, "violation", 9);
    let checked = rsandbox_in(place, who, &["check", "--json", option], &[], None);
    checked.assert_code(0);
    let checked_layers = checked.json()["evaluation"]["layers"].clone();
    for layer in ["namespaces", "private_root", "workspace_quota", "landlock", "seccomp"] {
        assert_eq!(
            checked_layers[layer], j["layers"][layer],
            "check and an evaluation agree on {layer}:{checked}{out}"
        );
    }
    j["layers"].clone()
}

both!(
    /// gVisor and old kernels have no Landlock: refused unless `--best-effort`; then the
    /// private root, seccomp and the uid still keep host files and the network out.
    fn without_landlock_best_effort_says_what_is_missing(who) {
        let _g = shared();
        let layers = refused_then_runs_with(Place::NoLandlock, who, "--best-effort", "Landlock");
        assert_eq!(layers["landlock"], "none", "{layers}");
        assert_eq!(layers["private_root"], json!(true), "{layers}");
        assert_eq!(layers["seccomp"], json!(true), "{layers}");
    }
);

/// An unprivileged user without user namespaces gets no namespaces at all: refused
/// unless `--no-namespaces`, then as in a default container.
#[test]
fn without_user_namespaces_a_user_runs_with_no_namespaces() {
    let _g = shared();
    let layers = refused_then_runs_with(Place::NoUserNamespaces, Who::User, "--no-namespaces", "namespaces");
    assert_eq!(layers["namespaces"], json!([]), "{layers}");
    assert_eq!(layers["landlock"], "full", "{layers}");
}

/// A chroot whose `/` is not a mount point: the mount namespace cannot be kept from the
/// host, so it is refused (naming why), and `--no-namespaces` runs.
#[test]
fn in_a_chroot_the_mount_steps_are_refused_and_named() {
    let _g = shared();
    let layers = refused_then_runs_with(Place::Chroot, Who::Root, "--no-namespaces", "not a mount point");
    assert_eq!(layers["private_root"], json!(false), "{layers}");
    assert_eq!(layers["landlock"], "full", "{layers}");
    assert!(layers["identity"]["uid"].as_u64().unwrap() >= 2_000_000_000, "{layers}");
}

both!(
    /// A server refuses to start where the sandbox cannot get its layers (it would fail
    /// every request), naming the option; with the option it serves.
    fn the_mcp_server_refuses_to_start_without_its_layers(who) {
        let _g = shared();
        let out = rsandbox_in(Place::ContainerDefault, who, &["mcp"], &[], Some(b""));
        out.assert_code(11);
        assert!(out.stderr.contains("--no-namespaces"), "names the option:{out}");
        // With it, the server starts and tells the agent what the sandboxes lack.
        let initialize = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}
"#;
        let out = rsandbox_in(Place::ContainerDefault, who, &["mcp", "--no-namespaces"], &[], Some(initialize));
        let reply: Value = serde_json::from_str(out.stdout.lines().next().unwrap_or("null")).unwrap_or(Value::Null);
        let instructions = reply["result"]["instructions"].as_str().unwrap_or_default();
        assert!(instructions.contains("weaker isolation") && instructions.contains("no namespaces"), "{out}");
        assert!(instructions.contains("no private root"), "{out}");
    }
);

/// Root without CAP_SYS_ADMIN where user namespaces are allowed (podman's default
/// profile, emulated by dropping the capability): each sandbox becomes its own uid first
/// and takes a user namespace as an ordinary user does, keeping every layer.
#[test]
fn root_without_cap_sys_admin_takes_a_user_namespace_and_keeps_every_layer() {
    let _g = shared();
    let out = rsandbox_in(Place::WithoutSysAdmin, Who::Root, &["eval", "--json", "file.create('x')"], &[], None);
    let j = out.json();
    assert_outcome(&out, &j, "ok", 0);
    let layers = &j["layers"];
    assert_eq!(layers["namespaces"], json!(["user", "net", "ipc", "uts"]), "{out}");
    assert_eq!(layers["private_root"], json!(true), "{out}");
    assert!(layers["workspace_quota"].as_u64().is_some(), "the quota holds:{out}");
    assert_eq!(layers["landlock"], "full", "{out}");
    assert_eq!(layers["seccomp"], json!(true), "{out}");
    assert!(layers["identity"]["uid"].as_u64().unwrap() >= 2_000_000_000, "its own uid:{out}");
    let out = rsandbox_in(Place::WithoutSysAdmin, Who::Root, &["eval", "--json", "system('id')"], &[], None);
    let j = out.json();
    assert_outcome(&out, &j, "violation", 9);
    assert_eq!(j["violation"]["syscall"], "execve", "{out}");
}
