//! The stdio protocol end to end: `rsandbox serve --stdio` driven like a client would,
//! every line it writes validated against docs/protocol.schema.json.
#![allow(clippy::undocumented_unsafe_blocks)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::OnceLock;

fn validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/protocol.schema.json");
        let mut schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        // Validate server output: point the root at $defs/output.
        schema["$ref"] = json!("#/$defs/output");
        jsonschema::validator_for(&schema).expect("the schema compiles")
    })
}

/// Compiled once: a flood of requests must go out faster than they finish.
fn request_validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/protocol.schema.json");
        let mut schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        schema["$ref"] = json!("#/$defs/request");
        jsonschema::validator_for(&schema).unwrap()
    })
}

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Server {
    fn start() -> Server {
        Server::start_with(&[], None)
    }

    /// With more arguments, and `RSANDBOX_NODE_ID` set or removed.
    fn start_with(args: &[&str], node_env: Option<&str>) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rsandbox"));
        command.args(["serve", "--stdio"]).args(args);
        match node_env {
            Some(tag) => command.env("RSANDBOX_NODE_ID", tag),
            None => command.env_remove("RSANDBOX_NODE_ID"),
        };
        Server::spawn(command)
    }

    /// Started by `sh` after `ulimit <limit>` (e.g. `-Sn 64`): the server is the shell's
    /// process (`exec`), so its pid is the child's.
    fn start_under_ulimit(limit: &str) -> Server {
        let mut command = Command::new("sh");
        command.args(["-c", &format!("ulimit {limit} && exec \"$0\" serve --stdio"), env!("CARGO_BIN_EXE_rsandbox")]);
        Server::spawn(command)
    }

    fn spawn(mut command: Command) -> Server {
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("rsandbox serve starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Server { child, stdin, stdout }
    }

    fn send_raw(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn send(&mut self, request: Value) {
        assert!(request_validator().is_valid(&request), "test request does not match the schema: {request}");
        self.send_raw(&request.to_string());
    }

    /// The next line, checked against the schema.
    fn recv(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        let errors: Vec<String> = validator().iter_errors(&value).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "output does not match the schema: {errors:?}\n{value}");
        value
    }

    /// Responses until the one with this id (events and other responses skipped).
    fn recv_id(&mut self, id: i64) -> Value {
        self.recv_id_with_events(id).0
    }

    /// The response with this id, and the events for it that came first (with the
    /// time each arrived).
    fn recv_id_with_events(&mut self, id: i64) -> (Value, Vec<(Value, std::time::Instant)>) {
        let mut events = Vec::new();
        loop {
            let v = self.recv();
            if v["id"] == json!(id) {
                if v.get("event").is_some() {
                    events.push((v, std::time::Instant::now()));
                    continue;
                }
                return (v, events);
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

#[test]
fn eval_session_tools_and_close() {
    let mut s = Server::start();
    s.send(json!({"id": 1, "op": "eval", "code": "1+1", "timeout": 5}));
    let r = s.recv_id(1);
    assert_eq!(r["result"]["outcome"], "ok");
    assert_eq!(r["result"]["value"], 2);

    s.send(json!({"id": 2, "op": "session.create", "tools": [
        {"name": "add", "description": "adds", "args": {"a": "numeric", "b": "numeric"}}]}));
    let sid = s.recv_id(2)["session"].as_str().unwrap().to_string();

    s.send(json!({"id": 3, "op": "session.execute", "session": sid, "code": "x <- add(1, 2); x * 10", "timeout": 5, "max_tool_calls": 10}));
    let event = s.recv();
    assert_eq!(event["event"], "tool_call");
    assert_eq!(event["tool"], "add");
    assert_eq!(event["session"], sid.as_str());
    assert_eq!(event["args"], json!({"a": 1, "b": 2}));
    s.send(json!({"op": "tool_result", "call": event["call"], "value": 3}));
    let r = s.recv_id(3);
    assert_eq!(r["result"]["value"], 30);

    s.send(json!({"id": 4, "op": "session.execute", "session": sid, "code": "add(5, 5)"}));
    let event = s.recv();
    s.send(json!({"op": "tool_result", "call": event["call"], "error": "host refused"}));
    let r = s.recv_id(4);
    assert_eq!(r["result"]["outcome"], "error");
    assert_eq!(r["result"]["error"]["message"], "host refused");

    s.send(json!({"id": 5, "op": "session.execute", "session": sid, "code": "x"}));
    assert_eq!(s.recv_id(5)["result"]["value"], 3, "state persists across executes");
    s.send(json!({"id": 6, "op": "session.close", "session": sid}));
    assert_eq!(s.recv_id(6)["closed"], true);
    s.send(json!({"id": 7, "op": "session.execute", "session": sid, "code": "x"}));
    assert_eq!(s.recv_id(7)["error"]["code"], "unknown_session");
}

/// Session ids are unguessable (128 random bits, never `session-1`, `session-2`) and
/// carry the node tag: `--node-id`, else `RSANDBOX_NODE_ID`; a bad tag is refused.
#[test]
fn session_ids_are_random_and_carry_the_node() {
    let is_id = |id: &str, node: &str| {
        let hex = id.strip_prefix(&format!("s-{node}-")).unwrap_or("");
        hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    };
    for (args, env, node) in
        [(&["--node-id", "eu-west-7"][..], Some("ignored-env"), "eu-west-7"), (&[][..], Some("rack-9"), "rack-9")]
    {
        let mut s = Server::start_with(args, env);
        let mut ids = Vec::new();
        for id in 1..=3 {
            s.send(json!({"id": id, "op": "session.create"}));
            ids.push(s.recv_id(id)["session"].as_str().unwrap().to_string());
        }
        assert!(ids.iter().all(|id| is_id(id, node)), "{ids:?}");
        assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2], "{ids:?}");
        // The old sequential names are not sessions.
        s.send(json!({"id": 9, "op": "session.execute", "session": "session-1", "code": "1"}));
        assert_eq!(s.recv_id(9)["error"]["code"], "unknown_session");
        s.send(json!({"id": 10, "op": "session.execute", "session": ids[2], "code": "1"}));
        assert_eq!(s.recv_id(10)["result"]["value"], 1);
    }
    for (args, env) in [(&["--node-id", "Bad_Node"][..], None), (&[][..], Some("no spaces"))] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rsandbox"));
        command.args(["serve", "--stdio"]).args(args).stdin(Stdio::null());
        if let Some(tag) = env {
            command.env("RSANDBOX_NODE_ID", tag);
        }
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("invalid node id"));
    }
}

/// Requests from a file (`serve --stdio < requests.jsonl`), which epoll cannot watch,
/// are each answered, and an empty input (`< /dev/null`) ends the server at once.
#[test]
fn requests_from_a_file_are_each_answered() {
    let path = std::env::temp_dir().join(format!("rsandbox-requests-{}.jsonl", std::process::id()));
    let lines: String =
        (1..=3).map(|id| format!("{}\n", json!({"id": id, "op": "eval", "code": format!("{id} * 10")}))).collect();
    std::fs::write(&path, lines).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rsandbox"))
        .args(["serve", "--stdio"])
        .stdin(std::fs::File::open(&path).unwrap())
        .output()
        .unwrap();
    std::fs::remove_file(&path).ok();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut values: Vec<(i64, i64)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .map(|answer| (answer["id"].as_i64().unwrap(), answer["result"]["value"].as_i64().unwrap()))
        .collect();
    values.sort();
    assert_eq!(values, [(1, 10), (2, 20), (3, 30)]);
    let empty =
        Command::new(env!("CARGO_BIN_EXE_rsandbox")).args(["serve", "--stdio"]).stdin(Stdio::null()).output().unwrap();
    assert!(empty.status.success() && empty.stdout.is_empty(), "{}", String::from_utf8_lossy(&empty.stderr));
}

#[test]
fn bad_input_gets_structured_errors_and_the_server_keeps_serving() {
    let mut s = Server::start();
    s.send_raw("this is not json");
    let e = s.recv();
    assert_eq!((e["id"].clone(), e["error"]["code"].clone()), (Value::Null, json!("parse_error")));
    s.send_raw(r#"{"id": 2, "op": "launch_missiles"}"#);
    assert_eq!(s.recv()["error"]["code"], "unknown_op");
    s.send_raw(r#"{"id": 3, "code": "1"}"#);
    assert_eq!(s.recv()["error"]["code"], "invalid_request");
    s.send_raw(r#"{"id": 4, "op": "eval"}"#);
    assert_eq!(s.recv()["error"]["code"], "invalid_request");
    s.send_raw(r#"{"id": 5, "op": "eval", "code": "1", "extra": true}"#);
    assert_eq!(s.recv()["error"]["code"], "invalid_request");
    s.send_raw(r#"{"id": 6, "op": "eval", "code": "   "}"#);
    assert_eq!(s.recv()["error"]["code"], "bad_input");
    s.send_raw(r#"{"id": 7, "op": "eval", "code": "1", "timeout": -3}"#);
    assert_eq!(s.recv()["error"]["code"], "bad_input");
    s.send_raw(r#"{"op": "tool_result", "call": "call-999", "value": 1}"#);
    assert_eq!(s.recv()["error"]["code"], "unknown_call");
    s.send_raw(r#"{"id": 8, "op": "session.create", "tools": [{"name": "if", "args": {}}]}"#);
    assert_eq!(s.recv()["error"]["code"], "invalid_request");
    let huge = format!(r#"{{"id": 9, "op": "eval", "code": "{}"}}"#, "x".repeat(17 << 20));
    s.send_raw(&huge);
    let e = s.recv();
    assert_eq!((e["id"].clone(), e["error"]["code"].clone()), (Value::Null, json!("line_too_long")));
    s.send(json!({"id": 10, "op": "eval", "code": "'still serving'"}));
    assert_eq!(s.recv_id(10)["result"]["value"], "still serving");
    s.send(json!({"id": 11, "op": "lint", "code": "x <- 'system(1)'\nsystem('id')"}));
    let f = s.recv_id(11);
    assert_eq!(f["findings"], json!([{"line": 2, "column": 1, "concern": "system_call", "call": "system"}]));
}

#[test]
fn sessions_run_concurrently_and_a_busy_session_says_so() {
    let mut s = Server::start();
    s.send(json!({"id": 1, "op": "session.create"}));
    let a = s.recv_id(1)["session"].as_str().unwrap().to_string();
    s.send(json!({"id": 2, "op": "session.create"}));
    let b = s.recv_id(2)["session"].as_str().unwrap().to_string();
    // Each execute reports when it started and ended (wall clock inside the sandbox).
    let timed = "t0 <- as.numeric(Sys.time()); Sys.sleep(1); c(t0, as.numeric(Sys.time()))";
    s.send(json!({"id": 3, "op": "session.execute", "session": a, "code": timed}));
    s.send(json!({"id": 4, "op": "session.execute", "session": b, "code": timed}));
    std::thread::sleep(std::time::Duration::from_millis(300));
    s.send(json!({"id": 5, "op": "session.execute", "session": a, "code": "1"}));
    let mut got = std::collections::HashMap::new();
    while got.len() < 3 {
        let v = s.recv();
        got.insert(v["id"].as_i64().unwrap(), v);
    }
    assert_eq!(got[&5]["error"]["code"], "busy");
    let span = |id: i64| {
        let v = &got[&id]["result"]["value"];
        (v[0].as_f64().unwrap(), v[1].as_f64().unwrap())
    };
    let ((a0, a1), (b0, b1)) = (span(3), span(4));
    assert!(a0 < b1 && b0 < a1, "the two executes did not overlap: a {a0}..{a1}, b {b0}..{b1}");
}

#[test]
fn floods_of_requests_and_sessions_are_bounded() {
    let mut s = Server::start();
    // 80 slow evaluations at once: at most 64 run, the rest are told `busy` at once.
    for id in 0..80 {
        s.send(json!({"id": id, "op": "eval", "code": "Sys.sleep(1); 1"}));
    }
    let (mut ok, mut busy) = (0, 0);
    for _ in 0..80 {
        let v = s.recv();
        if v["error"]["code"] == "busy" {
            busy += 1;
        } else {
            assert_eq!(v["result"]["outcome"], "ok", "{v}");
            ok += 1;
        }
    }
    assert_eq!((ok, busy), (64, 16));
    // Sessions hold a sandbox each: the 65th is refused, closing one frees a slot.
    let mut ids = Vec::new();
    for id in 100..165 {
        s.send(json!({"id": id, "op": "session.create"}));
        let v = s.recv_id(id);
        match v["session"].as_str() {
            Some(sid) => ids.push(sid.to_string()),
            None => assert_eq!(v["error"]["code"], "busy", "{v}"),
        }
    }
    assert_eq!(ids.len(), 64);
    s.send(json!({"id": 200, "op": "session.close", "session": ids[0]}));
    assert_eq!(s.recv_id(200)["closed"], true);
    s.send(json!({"id": 201, "op": "session.create"}));
    assert!(s.recv_id(201)["session"].is_string(), "a slot freed by close");
}

/// The server's open-file limits (soft, hard), from its `/proc/PID/limits`.
fn open_file_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).expect("a Max open files line");
    let fields: Vec<&str> = line.split_whitespace().collect();
    (fields[3].to_string(), fields[4].to_string())
}

#[test]
fn a_server_raises_its_soft_open_file_limit_to_the_hard_one() {
    // Each session holds about nine descriptors: 24 need ~250, beyond a soft limit of 64.
    let mut s = Server::start_under_ulimit("-Sn 64");
    for id in 0..24 {
        s.send(json!({"id": id, "op": "session.create"}));
        assert!(s.recv_id(id)["session"].is_string(), "session {id} under a soft limit of 64");
    }
    let (soft, hard) = open_file_limits(s.child.id());
    assert_eq!(soft, hard, "the soft limit raised to the hard one");
    assert_ne!(soft, "64");
}

#[test]
fn out_of_descriptors_a_sandbox_is_refused_as_busy_and_the_server_keeps_serving() {
    // A hard limit of 300 (R needs 256 for its sandboxes' default): about 28 sessions.
    let mut s = Server::start_under_ulimit("-n 300");
    let mut ids = Vec::new();
    let refused = (0..64)
        .find_map(|id| {
            s.send(json!({"id": id, "op": "session.create"}));
            let v = s.recv_id(id);
            match v["session"].as_str() {
                Some(sid) => {
                    ids.push(sid.to_string());
                    None
                }
                None => Some(v),
            }
        })
        .expect("a session refused before the server's 64");
    assert!(ids.len() >= 10, "{} sessions before the refusal", ids.len());
    assert_eq!(refused["error"]["code"], "busy", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("as many files open as its limit allows (300;"), "{message}");
    assert!(message.contains("ulimit -n"), "{message}");
    // A burst at the limit meets it wherever a descriptor is taken (a pipe, the meter's
    // /proc files, the pidfd or listener that come over a socket): each is refused as
    // busy, and the sessions made before still answer (no refusal tore down the
    // zygote's link, which every sandbox's events travel on).
    for id in 200..216 {
        s.send(json!({"id": id, "op": "session.create"}));
    }
    // (Answered in any order.)
    let mut answered = std::collections::HashSet::new();
    while answered.len() < 16 {
        let v = s.recv();
        assert!(answered.insert(v["id"].as_i64().unwrap()), "one answer per request: {v}");
        match v["session"].as_str() {
            Some(sid) => ids.push(sid.to_string()),
            None => assert_eq!(v["error"]["code"], "busy", "{v}"),
        }
    }
    s.send(json!({"id": 99, "op": "session.execute", "session": ids[1], "code": "1+1"}));
    assert_eq!(s.recv_id(99)["result"]["value"], 2, "a session made before the refusals");
    // Closing a session frees its descriptors for the next one.
    s.send(json!({"id": 100, "op": "session.close", "session": ids[0]}));
    assert_eq!(s.recv_id(100)["closed"], true);
    s.send(json!({"id": 101, "op": "session.create"}));
    let again = s.recv_id(101);
    assert!(again["session"].is_string(), "a session after one was closed: {again}");
    s.send(json!({"id": 102, "op": "session.execute", "session": again["session"], "code": "1+1"}));
    assert_eq!(s.recv_id(102)["result"]["value"], 2);
}

#[test]
fn v2_streaming_interrupt_files_and_snapshots() {
    let mut s = Server::start();
    // Streamed output: the line printed before the sleep arrives well before the result,
    // which comes after the sleep (a gap, not a bound on the start: a loaded machine
    // delays both ends alike).
    s.send(json!({"id": 1, "op": "eval", "code": "cat('before\\n'); message('m'); Sys.sleep(3); cat('after\\n')", "stream": true}));
    let (r, events) = s.recv_id_with_events(1);
    let result_arrived = std::time::Instant::now();
    assert_eq!(r["result"]["outcome"], "ok", "{r}");
    assert_eq!(r["result"]["stdout"], "before\nafter\n");
    let before = events
        .iter()
        .find(|(e, _)| e["stream"] == "stdout" && e["text"].as_str().unwrap().contains("before"))
        .expect("streamed");
    assert!(result_arrived.duration_since(before.1) > std::time::Duration::from_secs(1), "before was not streamed");
    assert!(events.iter().any(|(e, _)| e["stream"] == "message" && e["text"] == "m\n"), "{events:?}");

    // Files in and out of a session, and the rules.
    s.send(json!({"id": 2, "op": "session.create"}));
    let sid = s.recv_id(2)["session"].as_str().unwrap().to_string();
    s.send(json!({"id": 3, "op": "session.put_file", "session": sid, "path": "in/x.txt", "data_base64": "aGVsbG8="}));
    assert_eq!(s.recv_id(3)["size"], 5);
    s.send(json!({"id": 4, "op": "session.execute", "session": sid, "code": "k <- 7; writeLines(toupper(readLines('in/x.txt', warn = FALSE)), 'out.txt')"}));
    assert_eq!(s.recv_id(4)["result"]["outcome"], "ok");
    s.send(json!({"id": 5, "op": "session.get_file", "session": sid, "path": "out.txt"}));
    assert_eq!(s.recv_id(5)["data_base64"], "SEVMTE8K");
    s.send(json!({"id": 6, "op": "session.list_files", "session": sid}));
    let listing = s.recv_id(6);
    assert_eq!(listing["files"], json!([{"path": "in/x.txt", "size": 5}, {"path": "out.txt", "size": 6}]), "{listing}");
    s.send_raw(&json!({"id": 7, "op": "session.get_file", "session": sid, "path": "../../etc/passwd"}).to_string());
    assert_eq!(s.recv_id(7)["error"]["code"], "bad_input");

    // Interrupt keeps the session's state.
    s.send(json!({"id": 8, "op": "session.execute", "session": sid, "code": "repeat {}"}));
    std::thread::sleep(std::time::Duration::from_millis(500));
    s.send(json!({"id": 9, "op": "session.interrupt", "session": sid}));
    let mut got = std::collections::HashMap::new();
    while got.len() < 2 {
        let v = s.recv();
        if let Some(id) = v["id"].as_i64() {
            got.insert(id, v);
        }
    }
    assert_eq!(got[&9]["interrupted"], true);
    assert_eq!(got[&8]["result"]["outcome"], "interrupted", "{}", got[&8]);
    s.send(json!({"id": 10, "op": "session.execute", "session": sid, "code": "k"}));
    assert_eq!(s.recv_id(10)["result"]["value"], 7);

    // A snapshot restores into a new session; it is opaque to the server.
    s.send(json!({"id": 11, "op": "session.snapshot", "session": sid}));
    let snapshot = s.recv_id(11)["snapshot"].as_str().unwrap().to_string();
    s.send(json!({"id": 12, "op": "session.create", "restore": snapshot}));
    let restored = s.recv_id(12)["session"].as_str().unwrap().to_string();
    s.send(json!({"id": 13, "op": "session.execute", "session": restored, "code": "k * 6"}));
    assert_eq!(s.recv_id(13)["result"]["value"], 42);
    s.send(json!({"id": 14, "op": "session.create", "restore": "aGVsbG8="}));
    assert_eq!(s.recv_id(14)["error"]["code"], "bad_input");

    // eval with files in and collected out.
    s.send(json!({"id": 15, "op": "eval", "code": "file.copy('a.csv', 'b.csv')",
                  "files": [{"path": "a.csv", "data_base64": "eCx5Cg=="}], "collect": ["*.csv"]}));
    let r = s.recv_id(15);
    assert_eq!(
        r["result"]["files"],
        json!([{"path": "a.csv", "size": 4, "data_base64": "eCx5Cg=="},
                                            {"path": "b.csv", "size": 4, "data_base64": "eCx5Cg=="}]),
        "{r}"
    );
}

#[test]
fn a_session_keeps_no_process_but_r_between_requests() {
    let mut s = Server::start();
    s.send(json!({"id": 1, "op": "session.create"}));
    let id = s.recv_id(1)["session"].as_str().unwrap().to_string();
    // A worker that would spin for 100 s, left running when the execute returns.
    let start = "job <- parallel::mcparallel({ x <- 0; t <- Sys.time(); while (Sys.time() - t < 100) x <- x + 1; 'finished' }); 'started'";
    s.send(json!({"id": 2, "op": "session.execute", "session": id, "code": start, "timeout": 20}));
    assert_eq!(s.recv_id(2)["result"]["value"], "started");
    // Had it survived, collecting it would wait the 100 s and time out; killed, it
    // yields no result at once, and R's own state is intact.
    let collect = "r <- parallel::mccollect(job, wait = TRUE); c(is.null(r[[1]]), exists('job'))";
    s.send(json!({"id": 3, "op": "session.execute", "session": id, "code": collect, "timeout": 20}));
    let r = s.recv_id(3);
    assert_eq!(r["result"]["outcome"], "ok", "{r}");
    assert_eq!(r["result"]["value"], json!([true, true]), "{r}");
}

#[test]
fn a_session_is_metered_as_a_whole() {
    let mut s = Server::start();
    s.send(json!({"id": 1, "op": "session.create", "limits": {"cpu": 1}}));
    let id = s.recv_id(1)["session"].as_str().unwrap().to_string();
    let spin = "jobs <- lapply(1:4, function(i) parallel::mcparallel({ x <- 0; repeat x <- x + 1 })); parallel::mccollect(jobs)";
    s.send(json!({"id": 2, "op": "session.execute", "session": id, "code": spin, "timeout": 30}));
    let r = s.recv_id(2);
    assert_eq!(r["result"]["outcome"], "cpu_limit", "{r}");
    assert!(r["result"]["usage"]["sandbox_cpu_ms"].as_u64().unwrap() > 1000, "{r}");
}

/// Lines of every kind the server writes, each checked by `recv` against the schema
/// generated from the code's types (`docs/protocol.schema.json`), with what they must
/// say: a syntax error, an R error with its trace and a warning, typed values (a data
/// frame with a factor, `NA`, a date, `NaN`), a value the encoding cannot carry, a
/// collected file and a plot, a tool call and a call refused before it reached the
/// client, and errors. The schema is no blank cheque either: lines the server never
/// writes are refused by it.
#[test]
fn every_kind_of_line_matches_the_generated_schema() {
    let mut s = Server::start();
    s.send(json!({"id": 1, "op": "eval", "code": "f <- function(", "timeout": 20}));
    let r = s.recv_id(1);
    assert_eq!((&r["result"]["outcome"], &r["result"]["syntax_error"]["line"]), (&json!("error"), &json!(2)), "{r}");

    s.send(
        json!({"id": 2, "op": "eval", "code": "g <- function() { warning('w'); stop('boom') }; g()", "timeout": 20}),
    );
    let r = s.recv_id(2);
    assert_eq!(r["result"]["error"]["message"], "boom", "{r}");
    assert_eq!(r["result"]["error"]["trace"], json!(["g()", "stop(\"boom\")"]), "{r}");
    assert_eq!(r["result"]["warnings"], json!([{"message": "w", "call": "g()"}]), "{r}");

    let frame = "data.frame(f = factor(c('a', NA)), n = c(1L, NA), d = as.Date(c('2024-01-02', NA)), x = c(NaN, Inf))";
    s.send(json!({"id": 3, "op": "eval", "code": frame, "typed": true, "timeout": 20}));
    let r = s.recv_id(3);
    assert_eq!(
        r["result"]["value_typed"],
        json!({"type": "data.frame", "names": ["f", "n", "d", "x"], "nrow": 2, "columns": [
            {"type": "factor", "levels": ["a"], "codes": [1, null]},
            {"type": "integer", "value": [1, null]},
            {"type": "Date", "value": ["2024-01-02", null]},
            {"type": "double", "value": ["NaN", "Inf"]}]}),
        "{r}"
    );

    s.send(json!({"id": 4, "op": "eval", "code": "lm(y ~ x, data.frame(x = 1:3, y = c(2, 4, 7)))", "typed": true}));
    let r = s.recv_id(4);
    assert_eq!(r["result"]["value_typed"], json!({"type": "unsupported", "class": ["lm"]}), "{r}");

    s.send(json!({"id": 5, "op": "eval", "code": "writeLines('a', 'out.txt'); plot(1:3)", "collect": ["*.txt"]}));
    let r = s.recv_id(5);
    assert_eq!(r["result"]["files"], json!([{"path": "out.txt", "size": 2, "data_base64": "YQo="}]), "{r}");
    assert_eq!(r["result"]["plots"][0]["format"], "png", "{r}");

    s.send(json!({"id": 6, "op": "session.create", "tools": [{"name": "twice", "args": {"n": "integer"}}]}));
    let sid = s.recv_id(6)["session"].as_str().unwrap().to_string();
    s.send(json!({"id": 7, "op": "session.execute", "session": sid, "code": "twice(3e9)"}));
    let r = s.recv_id(7);
    assert_eq!(r["result"]["outcome"], "error", "a call out of R's integer range never reaches the client: {r}");
    s.send(json!({"id": 8, "op": "session.execute", "session": sid, "code": "twice(21L)"}));
    let call = s.recv();
    assert_eq!(
        (&call["event"], &call["tool"], &call["args"]),
        (&json!("tool_call"), &json!("twice"), &json!({"n": 21}))
    );
    s.send(json!({"op": "tool_result", "call": call["call"], "value": 42}));
    assert_eq!(s.recv_id(8)["result"]["value"], 42);

    s.send_raw("{not json");
    assert_eq!(s.recv()["error"]["code"], "parse_error");
    s.send_raw(r#"{"id": 9, "op": "session.execute", "session": "no-such-session", "code": "1"}"#);
    assert_eq!(s.recv_id(9)["error"]["code"], "unknown_session");
    s.send_raw(r#"{"id": 10, "op": "eval"}"#);
    assert_eq!(s.recv_id(10)["error"]["code"], "invalid_request");

    for never in [
        json!({"id": 1, "result": {"outcome": "ok"}}),
        json!({"id": 1, "closed": false}),
        json!({"id": 1, "session": "session-1"}),
        json!({"event": "output", "id": 1, "stream": "stdin", "text": "x"}),
        json!({"id": 1, "error": {"code": "oops", "message": "x"}}),
        json!({"id": 1, "interrupted": true, "extra": 1}),
    ] {
        assert!(!validator().is_valid(&never), "the schema takes a line the server never writes: {never}");
    }
    assert!(!request_validator().is_valid(&json!({"id": 1, "op": "eval", "code": "1", "timeout": 0})));
    assert!(!request_validator()
        .is_valid(&json!({"id": 1, "op": "session.put_file", "session": "s", "path": "", "data_base64": ""})));
}
