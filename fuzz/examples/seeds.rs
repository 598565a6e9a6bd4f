//! Writes the seed corpora under `fuzz/corpus/<target>/` (run once, from `fuzz/`:
//! `cargo run --example seeds`; the files are committed). Frames are the real encoder's
//! output; request lines, bodies and profiles are those of the docs and README.

use serde::Serialize;
use serde_json::json;
use std::path::Path;
use wire::frame;
use wire::messages::{ChildReport, ChildRequest, FileEntry, ToolStub, ZygoteEvent, ZygoteRequest};

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new("corpus").join(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

/// A frame, as the fuzz target takes it: the piece size first.
fn framed<T: Serialize>(chunk: u8, values: &[T]) -> Vec<u8> {
    let mut out = vec![chunk];
    for v in values {
        out.extend(frame::encode(v).unwrap());
    }
    out
}

fn applied() -> lockdown::Applied {
    lockdown::Applied {
        namespaces: vec!["user".into(), "pid".into(), "net".into(), "mount".into(), "ipc".into(), "uts".into()],
        workspace_quota: Some(64 << 20),
        private_root: true,
        identity: Some(lockdown::Identity { uid: 1000, gid: 1000 }),
        landlock: lockdown::LandlockEnforcement::Full,
        seccomp: true,
        nice: Some(10),
        programs: 0,
        learning: false,
    }
}

/// One of every report a child sends.
fn child_reports() -> Vec<(&'static str, ChildReport)> {
    vec![
        ("locked_down", ChildReport::LockedDown { applied: applied(), lockdown_us: 1234 }),
        ("setup_failed", ChildReport::SetupFailed { error: "landlock: not supported".into() }),
        (
            "evaluated",
            ChildReport::Evaluated {
                r: json!({"status": "ok", "value": [2], "visible": true, "messages": [], "warnings": ["w"],
                          "error": null, "syntax_error": null}),
                plots: vec!["iVBORw0KGgo=".into()],
                cpu_ms: 12,
                max_rss_kb: 51200,
            },
        ),
        (
            "evaluated_error",
            ChildReport::Evaluated {
                r: json!({"status": "error", "error": {"message": "boom", "call": "f()"}, "visible": false}),
                plots: vec![],
                cpu_ms: 1,
                max_rss_kb: 1,
            },
        ),
        ("tool_call", ChildReport::ToolCall { call: 7, tool: "add".into(), args: json!({"a": 1, "b": [2.5]}) }),
        ("tools_defined", ChildReport::ToolsDefined),
        ("tools_failed", ChildReport::ToolsFailed { error: "bad name".into() }),
        ("output", ChildReport::Output { stream: "message".into(), text: "hello\n".into() }),
        ("file_written", ChildReport::FileWritten { size: 5 }),
        ("file_content", ChildReport::FileContent { size: 5, data_base64: "aGVsbG8=".into() }),
        (
            "file_list",
            ChildReport::FileList { files: vec![FileEntry { path: "a/b.csv".into(), size: 3 }], truncated: false },
        ),
        ("snapshot", ChildReport::Snapshot { data_base64: "WDoKAAAAAwAEBAI=".into(), not_saved: vec!["con".into()] }),
        ("restored", ChildReport::Restored { warnings: vec!["package 'x' not attached".into()] }),
        ("refused", ChildReport::Refused { error: "path escapes the workspace".into() }),
        ("quit", ChildReport::Quit { status: 3 }),
    ]
}

fn wire_seeds() {
    let reports = child_reports();
    for (name, report) in &reports {
        write("wire_frames", &format!("report_{name}"), &framed(255, std::slice::from_ref(report)));
    }
    // A stream of several reports arriving in small pieces, as a busy child sends them.
    let stream: Vec<&ChildReport> = reports.iter().map(|(_, r)| r).take(5).collect();
    write("wire_frames", "reports_in_pieces", &framed(3, &stream));

    let events = vec![
        (
            "ready",
            ZygoteEvent::Ready {
                r_version: "R version 4.2.2 (2022-10-31)".into(),
                r_home: "/usr/lib/R".into(),
                library_paths: vec!["/usr/local/lib/R/site-library".into(), "/usr/lib/R/library".into()],
                r_directories: vec![("R_SHARE_DIR".into(), "/usr/share/R/share".into())],
                preloaded: vec!["stats".into()],
            },
        ),
        ("start_failed", ZygoteEvent::StartFailed { error: "cannot load Matrix".into() }),
        ("spawned", ZygoteEvent::Spawned { req: 1, pid: 4242 }),
        ("spawn_failed", ZygoteEvent::SpawnFailed { req: 2, error: "fork: EAGAIN".into() }),
        ("exited", ZygoteEvent::Exited { req: 3, code: None, signal: Some(9), cpu_ms: 10, max_rss_kb: 2048 }),
    ];
    for (name, event) in &events {
        // A seqpacket message is the JSON alone; the piece-size byte comes first.
        let mut bytes = vec![255];
        bytes.extend(serde_json::to_vec(event).unwrap());
        write("wire_frames", &format!("event_{name}"), &bytes);
    }

    let requests = vec![
        (
            "eval",
            ChildRequest::Eval {
                code: "x <- 1:10\nmean(x)".into(),
                stream: true,
                args: vec!["--flag".into()],
                echo: false,
                functions: Some(vec!["mean".into(), "<-".into()]),
                globals: Default::default(),
                typed: false,
            },
        ),
        ("put_file", ChildRequest::PutFile { path: "data/in.csv".into(), data_base64: "YSxiCjEsMgo=".into() }),
        ("get_file", ChildRequest::GetFile { path: "out.txt".into(), max_bytes: 1 << 20 }),
        ("list_files", ChildRequest::ListFiles),
        ("snapshot", ChildRequest::Snapshot),
        ("restore", ChildRequest::Restore { data_base64: "WDoKAAAAAw==".into() }),
        (
            "define_tools",
            ChildRequest::DefineTools {
                tools: vec![ToolStub { name: "add".into(), args: vec!["a".into(), "b".into()] }],
            },
        ),
        ("settle", ChildRequest::Settle),
        ("tool_reply", ChildRequest::ToolReply { call: 7, value: Some(json!(3)), error: None }),
    ];
    for (name, request) in &requests {
        write("wire_frames", &format!("request_{name}"), &framed(255, std::slice::from_ref(request)));
    }
    let spawn = ZygoteRequest::Spawn {
        req: 1,
        policy: lockdown::Policy::default(),
        workspace: "/tmp/rsandbox-ws".into(),
        env: vec![("HOME".into(), "/tmp/rsandbox-ws".into())],
        tools: vec![ToolStub { name: "add".into(), args: vec!["a".into()] }],
    };
    let mut bytes = vec![255];
    bytes.extend(serde_json::to_vec(&spawn).unwrap());
    write("wire_frames", "zygote_spawn", &bytes);
}

/// The outcome target's 32-byte view of the supervisor (see `fuzz_targets/outcome.rs`).
fn view(flags: u8, kill: u8, signal: u8, code: i32, cpu_ms: u64, cpu_limit: u64, violation: i64) -> Vec<u8> {
    let mut head = vec![flags, kill, signal];
    head.extend(code.to_le_bytes());
    head.extend(cpu_ms.to_le_bytes());
    head.extend(cpu_limit.to_le_bytes());
    head.extend(violation.to_le_bytes());
    head.push(0);
    head
}

fn outcome_seeds() {
    let views = [
        ("quiet", view(0, 0, 0, 0, 0, 0, 0)),
        ("exited_0", view(0b10_0010, 0, 0, 0, 15, 0, 0)),
        ("killed_sigkill_cpu", view(0b100_1010, 0, 9, 0, 2_000, 1, 0)),
        ("sigsys", view(0b100_0010, 0, 31, 0, 3, 0, 0)),
        ("violation_ptrace", view(0b100_0110, 2, 9, 0, 3, 0, 101)),
        ("timeout", view(0b101_0011, 0, 9, 0, 3, 0, 0)),
        ("protocol", view(0b1000_0001, 3, 0, 0, 0, 0, 0)),
        ("memory_limit", view(0b1, 7, 0, 0, 0, 0, 0)),
    ];
    let mut bodies: Vec<(String, Vec<u8>)> = child_reports()
        .into_iter()
        .filter(|(name, _)| ["evaluated", "evaluated_error", "quit", "locked_down"].contains(name))
        .map(|(name, report)| (name.to_string(), serde_json::to_vec(&report).unwrap()))
        .collect();
    // What R itself reports (the `r` of `evaluated`), as eval.R writes it.
    for (name, r) in [
        ("r_syntax_error", json!({"status": "error", "syntax_error": {"message": "unexpected ')'", "line": 1}})),
        ("r_memory_limit", json!({"status": "memory_limit", "error": {"message": "cannot allocate", "call": null}})),
        ("r_interrupted", json!({"status": "interrupted", "visible": false})),
        ("r_refused", json!({"status": "refused", "error": {"message": "system is not allowed"}})),
        (
            "r_typed",
            json!({"status": "ok", "value": {"a": [1, 2]}, "value_typed": {"type": "double", "value": [1.5]},
                   "visible": true, "messages": [{"text": "hi\n"}], "warnings": ["careful"]}),
        ),
    ] {
        bodies.push((name.to_string(), serde_json::to_vec(&r).unwrap()));
    }
    for (i, (view_name, head)) in views.iter().enumerate() {
        // Each view with a few bodies, and the bodies all with the quiet view.
        for (body_name, body) in bodies.iter().filter(|_| i == 0).chain(bodies.iter().skip(i).step_by(4).take(2)) {
            let mut bytes = head.clone();
            bytes.extend(body);
            write("outcome", &format!("{view_name}_{body_name}"), &bytes);
        }
    }
}

fn stdio_seeds() {
    let lines = [
        // docs/protocol.md's example exchange.
        r#"{"id":1,"op":"eval","code":"1+1","timeout":5}"#,
        r#"{"id":2,"op":"session.create","tools":[{"name":"add","description":"adds","args":{"a":"numeric","b":"numeric"}}]}"#,
        r#"{"id":3,"op":"session.execute","session":"session-2","code":"add(1, 2)","timeout":5,"max_tool_calls":10}"#,
        r#"{"op":"tool_result","call":"call-1","value":3}"#,
        r#"{"op":"tool_result","call":"call-7","error":"reason"}"#,
        r#"{"id":4,"op":"session.close","session":"session-2"}"#,
        // One of every other op, with every field.
        r#"{"id":"a","op":"eval","code":"cat(commandArgs(TRUE))","timeout":2.5,"limits":{"cpu":5,"memory":"512M","fsize":"16M","disk":"64M","nproc":16,"nofile":64,"max_output":"1M"},"stream":true,"files":[{"path":"in.csv","data_base64":"YSxiCg=="}],"collect":["*.png"],"args":["x"]}"#,
        r#"{"id":5,"op":"session.create","limits":{"memory":"1G"},"restore":"WDoKAAAAAw=="}"#,
        r#"{"id":6,"op":"session.execute","session":"session-1","code":"x","stream":true,"echo":false}"#,
        r#"{"id":7,"op":"session.interrupt","session":"session-1"}"#,
        r#"{"id":8,"op":"session.put_file","session":"session-1","path":"a/b.txt","data_base64":"aGVsbG8="}"#,
        r#"{"id":9,"op":"session.get_file","session":"session-1","path":"a/b.txt"}"#,
        r#"{"id":10,"op":"session.list_files","session":"session-1"}"#,
        r#"{"id":11,"op":"session.snapshot","session":"session-1"}"#,
        r#"{"id":12,"op":"lint","code":"system('ls')"}"#,
    ];
    for (i, line) in lines.iter().enumerate() {
        write("stdio_request", &format!("line_{i:02}"), line.as_bytes());
    }
}

fn http_seeds() {
    let bodies = [
        // README's examples.
        r#"{"code": "summary(c(1, 5, 9))"}"#,
        r#"{"code": "x <- lookup(\"pi\"); x * 2"}"#,
        r#"{"value": 3.14}"#,
        r#"{"error": "no such key"}"#,
        // Every field of each body.
        r#"{"code":"1","timeout":5,"limits":{"cpu":5,"memory":"512M","fsize":"16M","disk":"64M","nproc":16,"nofile":64,"max_output":"1M"},"files":[{"path":"in.csv","data_base64":"YSxiCg=="}],"collect":["out/*.csv"]}"#,
        r#"{"limits":{"memory":"1G"},"tools":[{"name":"lookup","description":"looks up","args":{"key":"character"}}],"restore":"WDoKAAAAAw=="}"#,
        r#"{"code":"x","timeout":0.5,"echo":false}"#,
        r#"{}"#,
    ];
    for (i, body) in bodies.iter().enumerate() {
        write("http_bodies", &format!("body_{i:02}"), body.as_bytes());
    }
}

fn profile_seeds() {
    let readme = r#"extends = "strict"               # or "base", "compile"
read = ["/srv/data"]             # extra read-only trees
write = ["/srv/data/out"]        # directories writable besides the workspace (no quota)
exec = ["/usr/bin/gfortran"]     # programs that may run (below); absent: none
libraries = ["/srv/R/library"]   # extra R libraries, searched first (readable)
packages = ["stats", "Matrix"]   # only these packages exist in the sandbox, with their
                                 # dependencies (Depends/Imports/LinkingTo) and R's base packages
functions = ["arithmetic", "data-frames", "paste"]  # the function allowlist (below); absent: off
preload = ["Matrix"]             # loaded once in the zygote
[limits]                         # defaults for this profile; flags still override
timeout = 10
memory = "512M"
cpu = 5
nproc = 16
disk = "64M"
"#;
    let profiles = [
        ("readme", readme.to_string()),
        ("strict", "extends = \"strict\"\n".into()),
        ("base", "extends = \"base\"\n".into()),
        ("compile", "extends = \"compile\"\nexec = [\"/bin/sh\"]\n".into()),
        // One that parses here: paths that exist, a writable directory of the user's own.
        (
            "valid",
            "extends = \"strict\"\nread = [\"/usr/share\"]\nexec = [\"/bin/sh\"]\nfunctions = [\"plotting\", \"models\", \"names<-\", \"%in%\", \"+\"]\n[limits]\nfsize = \"16MiB\"\nnofile = 64\n".into(),
        ),
    ];
    for (name, text) in &profiles {
        write("profile_toml", name, text.as_bytes());
    }
}

fn main() {
    wire_seeds();
    outcome_seeds();
    stdio_seeds();
    http_seeds();
    profile_seeds();
}
