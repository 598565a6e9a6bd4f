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
