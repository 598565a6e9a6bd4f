//! Replicas behind a balancer (issue #28), on loopback: what a request for a session
//! gets when the replica that held it is gone. Killed: `410 session_lost`, at once. Stopped
//! gracefully with `--snapshot-dir` on a shared directory: the session is saved, and the
//! next replica asked for it restores it under the same id, for the same token only, and
//! keeps serving it. Needs `cargo build --workspace` first (the zygote binary).

mod common;

use common::http_server::HttpServer;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

const TOKEN_A: &str = "token-of-the-grader-aaaaaaaaaaaaaaaaaaaaaaaa";
const TOKEN_B: &str = "token-of-the-student-bbbbbbbbbbbbbbbbbbbbbbbb";

fn replica(node: &str, dir: &Path) -> HttpServer {
    let tokens = dir.join("tokens");
    let snapshots = dir.join("snapshots");
    HttpServer::start(
        &[
            "--token-file",
            tokens.to_str().unwrap(),
            "--snapshot-dir",
            snapshots.to_str().unwrap(),
            "--shutdown-grace",
            "10",
        ],
        &[("RSANDBOX_NODE_ID", node)],
    )
}

fn execute(server: &HttpServer, token: &str, id: &str, code: &str) -> (u16, Value) {
    server.request("POST", &format!("/v1/sessions/{id}/execute"), Some(token), Some(&json!({"code": code})))
}

fn create(server: &HttpServer, token: &str) -> String {
    let (status, created) = server.request("POST", "/v1/sessions", Some(token), Some(&json!({})));
    assert_eq!(status, 201, "{created}");
    created["session"].as_str().unwrap().to_string()
}

/// SIGTERM, as a container engine stops a replica, and wait for it to finish.
fn stop_gracefully(server: &mut HttpServer) {
    let pid = rustix::process::Pid::from_child(&server.child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the replica did not stop within 60 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_session_outlives_its_replica_only_when_the_replica_stops_gracefully() {
    let dir = std::env::temp_dir().join(format!("rsandbox-replicas-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("snapshots")).unwrap();
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("grader:{TOKEN_A}\nstudent:{TOKEN_B}\n")).unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();

    let mut a = replica("replica-a", &dir);
    let b = replica("replica-b", &dir);
    let kept = create(&a, TOKEN_A);
    let second = create(&a, TOKEN_A);
    assert!(kept.starts_with("s-replica-a-"), "{kept}");
    assert_eq!(execute(&a, TOKEN_A, &kept, "x <- 41; invisible()").0, 200);
    assert_eq!(execute(&a, TOKEN_A, &second, "y <- 'second'; invisible()").0, 200);

    // Another replica's session that nobody saved: 410, not 404, and at once.
    let (status, answer) = execute(&b, TOKEN_A, &kept, "x");
    assert_eq!((status, answer["error"]["code"].as_str()), (410, Some("session_lost")), "{answer}");

    stop_gracefully(&mut a);
    let saved = dir.join("snapshots").join(format!("{kept}.json"));
    assert!(saved.is_file(), "the stopped replica saved its session");
    assert_eq!(std::fs::metadata(&saved).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(!dir.join("snapshots/replica-a.draining").exists(), "the draining marker is gone once saved");

    // Another token asking for it: as unknown as anywhere, and the session stays saved.
    let (status, answer) = execute(&b, TOKEN_B, &kept, "x");
    assert_eq!((status, answer["error"]["code"].as_str()), (410, Some("session_lost")), "{answer}");
    assert!(saved.is_file());

    // Its owner: restored on replica b under the same id, with its state, and kept there.
    let (status, answer) = execute(&b, TOKEN_A, &kept, "x + 1");
    assert_eq!((status, answer["value"].clone()), (200, json!(42)), "{answer}");
    assert!(!saved.exists(), "a restored session's file is claimed and removed");
    let (status, answer) = execute(&b, TOKEN_A, &kept, "x <- x + 1; x");
    assert_eq!((status, answer["value"].clone()), (200, json!(42)), "{answer}");
    let (_, listed) = b.request("GET", "/v1/sessions", Some(TOKEN_A), None);
    assert!(listed["sessions"].as_array().unwrap().iter().any(|s| s["session"] == json!(kept)), "{listed}");

    // Replica b is killed: what it held is lost (410), what is still saved carries on.
    let mut b = b;
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    let c = replica("replica-c", &dir);
    let (status, answer) = execute(&c, TOKEN_A, &kept, "x");
    assert_eq!((status, answer["error"]["code"].as_str()), (410, Some("session_lost")), "{answer}");
    let (status, answer) = execute(&c, TOKEN_A, &second, "y");
    assert_eq!((status, answer["value"].clone()), (200, json!("second")), "{answer}");
    drop(c);
    std::fs::remove_dir_all(&dir).ok();
}
