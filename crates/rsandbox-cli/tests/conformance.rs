//! Conformance: the one table `tests/conformance/scenarios.json`, run on every front —
//! the Rust library, `serve --stdio`, the CLI (through a private per-user daemon and with
//! `--no-daemon`), `serve --http`, and `rsandbox mcp` (through the official Python SDK,
//! `tests/conformance/mcp_runner.py`). The R package runs the same table in its own
//! testthat suite (`r/rsandbox/tests/testthat/test-conformance.R`).
//!
//! Each front maps the table's front-neutral steps to its own calls and reads back
//! front-neutral replies (a result, an error code, …), which one checker compares with
//! the step's `expect`. A scenario a front cannot express says why in the table; a
//! scenario that fails on a front because of a known bug says so under `known`, and is
//! then expected to fail (a known failure that passes fails the run, so the table stays
//! true). See `tests/conformance/README.md`.
//!
//! Build everything first (`cargo build --workspace`): the library front and the CLI
//! find `rsandbox-zygote` beside their binaries.

#[allow(dead_code)]
#[path = "common/engine_dirs.rs"]
mod engine_dirs;

use engine_dirs::engine_dirs_of;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A well-formed session id no server handed out.
/// Every server this suite starts is node `conformance` (RSANDBOX_NODE_ID): this id has
/// its tag and was never handed out; [`ELSEWHERE`] is another replica's.
const NEVER: &str = "s-conformance-00000000000000000000000000000000";
const ELSEWHERE: &str = "s-elsewhere-00000000000000000000000000000000";
/// The longest any single step may take before the runner gives up on it.
const STEP_LIMIT: Duration = Duration::from_secs(120);

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn table_path() -> PathBuf {
    repo_root().join("tests/conformance/scenarios.json")
}

fn table() -> Value {
    let text = std::fs::read_to_string(table_path()).expect("read tests/conformance/scenarios.json");
    serde_json::from_str(&text).expect("scenarios.json is JSON")
}

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_rsandbox")
}

// ---------------------------------------------------------------------------------------
// What a front answers, in the table's terms.
// ---------------------------------------------------------------------------------------

#[derive(Debug)]
enum Reply {
    /// An evaluation's result object (what `rsandbox eval --json` prints).
    Result(Value),
    /// The front refused the request with the protocol's code (MCP, which has no
    /// codes, is checked by its own runner).
    Error {
        code: Option<String>,
        message: String,
    },
    /// A session was made; its handle.
    Created(String),
    Interrupted(bool),
    Data(Vec<u8>),
    Files(Vec<String>),
    Snapshot(String),
    Closed,
    Done,
}

/// The table's limits (the protocol's `limits` object) and a step's tools.
type Limits = Value;

/// One front of the engine.
trait Front: Sync {
    fn eval(&self, code: &str, timeout: Option<f64>, limits: &Limits) -> Reply;
    fn create(&self, limits: &Limits, tools: &[Value], restore: Option<&str>) -> Reply;
    fn execute(&self, session: &str, code: &str, timeout: Option<f64>) -> Reply;
    fn interrupt(&self, session: &str) -> Reply;
    fn put_file(&self, session: &str, path: &str, data: &[u8]) -> Reply;
    fn get_file(&self, session: &str, path: &str) -> Reply;
    fn list_files(&self, session: &str) -> Reply;
    fn snapshot(&self, session: &str) -> Reply;
    fn close(&self, session: &str) -> Reply;
    fn restart(&self) -> Reply;
}

/// What a tool's host side answers, by the table's `policy`.
fn apply_policy(policy: &str, args: &Value) -> Result<Value, String> {
    match policy {
        "sum" => Ok(json!(args.as_object().map_or(0.0, |m| m.values().filter_map(Value::as_f64).sum::<f64>()))),
        "first" => Ok(args.as_object().and_then(|m| m.values().next().cloned()).unwrap_or(Value::Null)),
        "fail" => Err("the host refused this call".to_string()),
        other => panic!("unknown tool policy {other:?} in the table"),
    }
}

/// A tool's spec as fronts take it: the table's entry without `policy`.
fn tool_spec(tool: &Value) -> Value {
    let mut spec = tool.clone();
    spec.as_object_mut().expect("a tool is an object").remove("policy");
    spec
}

/// The code of a step: a string, or `{"repeat": s, "times": n}`.
fn code_of(step: &Value) -> String {
    match &step["code"] {
        Value::String(s) => s.clone(),
        Value::Object(o) => o["repeat"].as_str().expect("repeat").repeat(o["times"].as_u64().expect("times") as usize),
        other => panic!("a step's code must be a string or a repeat, not {other}"),
    }
}

// ---------------------------------------------------------------------------------------
// Running scenarios and checking expectations.
// ---------------------------------------------------------------------------------------

fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

fn clip(s: &str) -> String {
    let cut: String = s.chars().take(600).collect();
    if cut.len() < s.len() {
        format!("{cut}… [{} bytes]", s.len())
    } else {
        cut
    }
}

/// Compare a reply with a step's `expect` (an empty expect: any success).
fn check(expect: &Value, reply: &Reply) -> Result<(), String> {
    let e = |k: &str| expect.get(k).filter(|v| !v.is_null());
    if let Some(code) = e("error_code") {
        return match reply {
            Reply::Error { code: Some(got), .. } if got == code => Ok(()),
            other => Err(format!("expected error {code}, got {}", clip(&format!("{other:?}")))),
        };
    }
    if let Reply::Error { code, message } = reply {
        return Err(format!("expected success, got error {code:?}: {}", clip(message)));
    }
    let result_keys = [
        "outcome",
        "value",
        "value_within",
        "stdout_contains",
        "stdout_excludes",
        "error_contains",
        "syntax_error",
        "reset",
        "reset_reason",
        "plots",
        "refused_network",
    ];
    if result_keys.iter().any(|k| e(k).is_some()) {
        let Reply::Result(r) = reply else { return Err(format!("expected a result, got {reply:?}")) };
        let shown = || clip(&serde_json::to_string(r).unwrap_or_default());
        if let Some(o) = e("outcome") {
            if &r["outcome"] != o {
                return Err(format!("outcome {} instead of {o}: {}", r["outcome"], shown()));
            }
        }
        if let Some(v) = e("value") {
            if !json_equal(&r["value"], v) {
                return Err(format!("value {} instead of {v}: {}", r["value"], shown()));
            }
        }
        if let Some(w) = e("value_within") {
            let target = w["target"].as_f64().expect("target");
            let room = w["abs"].as_f64().unwrap_or(0.0).max(w["rel"].as_f64().unwrap_or(0.0) * target);
            let got = r["value"].as_f64().ok_or_else(|| format!("value {} is no number: {}", r["value"], shown()))?;
            if (got - target).abs() > room {
                return Err(format!("value {got} is not within {room} of {target}: {}", shown()));
            }
        }
        let stdout = r["stdout"].as_str().unwrap_or_default();
        if let Some(s) = e("stdout_contains").and_then(Value::as_str) {
            if !stdout.contains(s) {
                return Err(format!("stdout lacks {s:?}: {}", shown()));
            }
        }
        if let Some(s) = e("stdout_excludes").and_then(Value::as_str) {
            if stdout.contains(s) {
                return Err(format!("stdout has {s:?}: {}", shown()));
            }
        }
        if let Some(s) = e("error_contains").and_then(Value::as_str) {
            let message = r["error"]["message"].as_str().unwrap_or_default();
            if !message.contains(s) {
                return Err(format!("the error does not say {s:?}: {}", shown()));
            }
        }
        if let Some(want) = e("syntax_error").and_then(Value::as_bool) {
            if r["syntax_error"].is_object() != want {
                return Err(format!("syntax_error should be {}: {}", if want { "set" } else { "absent" }, shown()));
            }
        }
        if let Some(want) = e("reset").and_then(Value::as_bool) {
            if r["reset"].as_bool().unwrap_or(false) != want {
                return Err(format!("reset should be {want}: {}", shown()));
            }
        }
        if let Some(want) = e("reset_reason") {
            if &r["reset_reason"] != want {
                return Err(format!("reset_reason {} instead of {want}: {}", r["reset_reason"], shown()));
            }
        }
        if let Some(n) = e("plots").and_then(Value::as_u64) {
            let got = r["plots"].as_array().map_or(0, Vec::len) as u64;
            if got != n {
                return Err(format!("{got} plots instead of {n}"));
            }
        }
        if let Some(want) = e("refused_network").and_then(Value::as_bool) {
            if r["refused_network"].as_bool().unwrap_or(false) != want {
                return Err(format!("refused_network should be {want}: {}", shown()));
            }
        }
    }
    if let Some(want) = e("interrupted").and_then(Value::as_bool) {
        match reply {
            Reply::Interrupted(got) if *got == want => {}
            other => return Err(format!("expected interrupted {want}, got {other:?}")),
        }
    }
    if let Some(want) = e("data").and_then(Value::as_str) {
        match reply {
            Reply::Data(got) if got == want.as_bytes() => {}
            other => return Err(format!("expected the data {want:?}, got {}", clip(&format!("{other:?}")))),
        }
    }
    if let Some(want) = e("files_include").and_then(Value::as_array) {
        let Reply::Files(files) = reply else { return Err(format!("expected a listing, got {reply:?}")) };
        for f in want.iter().filter_map(Value::as_str) {
            if !files.iter().any(|g| g == f) {
                return Err(format!("{f} is not listed: {files:?}"));
            }
        }
    }
    if e("closed").is_some() && !matches!(reply, Reply::Closed) {
        return Err(format!("expected closed, got {reply:?}"));
    }
    Ok(())
}

/// The scenario's state on one front: session handles by name, the last snapshot.
#[derive(Default)]
struct Ids {
    sessions: HashMap<String, String>,
    snapshot: Option<String>,
}

impl Ids {
    fn session(&self, step: &Value) -> String {
        match step["session"].as_str().unwrap_or("main") {
            "@never" => NEVER.to_string(),
            "@elsewhere" => ELSEWHERE.to_string(),
            name => self.sessions.get(name).cloned().unwrap_or_else(|| panic!("no session {name:?} made yet")),
        }
    }
}

fn run_step(front: &dyn Front, step: &Value, ids: &mut Ids) -> Reply {
    let timeout = step["timeout"].as_f64();
    let limits = step.get("limits").cloned().unwrap_or(json!({}));
    let tools: Vec<Value> = step["tools"].as_array().cloned().unwrap_or_default();
    let op = step["op"].as_str().expect("a step has an op");
    match op {
        "eval" => front.eval(&code_of(step), timeout, &limits),
        "session.create" | "session.restore" => {
            let snapshot = (op == "session.restore")
                .then(|| ids.snapshot.clone().expect("session.restore needs a session.snapshot first"));
            let reply = front.create(&limits, &tools, snapshot.as_deref());
            if let Reply::Created(id) = &reply {
                ids.sessions.insert(step["as"].as_str().unwrap_or("main").to_string(), id.clone());
            }
            reply
        }
        "session.execute" => front.execute(&ids.session(step), &code_of(step), timeout),
        "session.interrupt" => front.interrupt(&ids.session(step)),
        "session.put_file" => front.put_file(
            &ids.session(step),
            step["path"].as_str().unwrap(),
            step["data"].as_str().unwrap().as_bytes(),
        ),
        "session.get_file" => front.get_file(&ids.session(step), step["path"].as_str().unwrap()),
        "session.list_files" => front.list_files(&ids.session(step)),
        "session.snapshot" => {
            let reply = front.snapshot(&ids.session(step));
            if let Reply::Snapshot(s) = &reply {
                ids.snapshot = Some(s.clone());
            }
            reply
        }
        "session.close" => front.close(&ids.session(step)),
        "server.restart" => front.restart(),
        other => panic!("unknown op {other:?} in the table"),
    }
}

/// A step running in the background: its label, its index, when it started, its thread.
type Background<'scope> = (String, usize, Instant, std::thread::ScopedJoinHandle<'scope, Reply>);

/// Run one scenario's steps on `front`. A `background` step runs on its own thread; the
/// steps that say `concurrent_with` its label run while it does (each `delay_ms` after
/// it started), and it is joined before the next step that does not.
fn run_scenario(front: &dyn Front, scenario: &Value) -> Result<(), String> {
    let steps = scenario["steps"].as_array().expect("steps");
    let mut ids = Ids::default();
    fn join(steps: &[Value], bg: Background<'_>) -> Result<(), String> {
        let (_, index, _, handle) = bg;
        let reply = handle.join().map_err(|_| format!("step {index} panicked"))?;
        check(&steps[index]["expect"], &reply).map_err(|e| format!("step {index} ({}): {e}", steps[index]["op"]))
    }
    std::thread::scope(|scope| {
        let mut background: Option<Background<'_>> = None;
        for (index, step) in steps.iter().enumerate() {
            match (step["concurrent_with"].as_str(), &background) {
                (Some(label), Some((running, _, started, _))) if label == running => {
                    let at = *started + Duration::from_millis(step["delay_ms"].as_u64().unwrap_or(0));
                    std::thread::sleep(at.saturating_duration_since(Instant::now()));
                }
                (Some(label), _) => panic!("step {index} is concurrent with {label:?}, which is not running"),
                (None, _) => {
                    if let Some(bg) = background.take() {
                        join(steps, bg)?;
                    }
                }
            }
            if step["background"].as_bool() == Some(true) {
                let (session, code, timeout) = (ids.session(step), code_of(step), step["timeout"].as_f64());
                assert_eq!(step["op"], "session.execute", "only an execute runs in the background");
                let handle = scope.spawn(move || front.execute(&session, &code, timeout));
                let label = step["label"].as_str().expect("a background step has a label").to_string();
                background = Some((label, index, Instant::now(), handle));
                continue;
            }
            let reply = run_step(front, step, &mut ids);
            check(&step["expect"], &reply).map_err(|e| format!("step {index} ({}): {e}", step["op"]))?;
        }
        if let Some(bg) = background.take() {
            join(steps, bg)?;
        }
        Ok(())
    })
}

/// Run every scenario `table_front` can express on `front`, one after another; print a
/// line per scenario and the total time; fail with every unexpected result.
fn run_front(label: &str, table_front: &str, front: &dyn Front) {
    let table = table();
    let started = Instant::now();
    let (mut passed, mut known, mut skipped, mut failures) = (0, 0, 0, Vec::new());
    for scenario in table["scenarios"].as_array().expect("scenarios") {
        let id = scenario["id"].as_str().expect("id");
        let says =
            scenario["fronts"][table_front].as_str().unwrap_or_else(|| panic!("{id}: no entry for {table_front}"));
        if says != "yes" {
            println!("{label}: skip  {id}: {says}");
            skipped += 1;
            continue;
        }
        let known_why = scenario["known"][label].as_str().or_else(|| scenario["known"][table_front].as_str());
        let t = Instant::now();
        let outcome = run_scenario(front, scenario);
        let secs = t.elapsed().as_secs_f64();
        match (outcome, known_why) {
            (Ok(()), None) => {
                println!("{label}: ok    {id} ({secs:.2} s)");
                passed += 1;
            }
            (Err(e), Some(why)) => {
                println!("{label}: known {id} ({secs:.2} s): {why} — got: {e}");
                known += 1;
            }
            (Ok(()), Some(why)) => {
                println!("{label}: FIXED {id}: passes although the table lists it as known ({why}); update the table");
                failures.push(format!("{id}: passes, but the table says known: {why}"));
            }
            (Err(e), None) => {
                println!("{label}: FAIL  {id} ({secs:.2} s): {e}");
                failures.push(format!("{id}: {e}"));
            }
        }
    }
    println!(
        "{label}: {passed} passed, {known} known failures, {skipped} not expressible, {} failed, in {:.1} s",
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{label}: scenarios failed:\n{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------------------
// The library.
// ---------------------------------------------------------------------------------------

fn engine_code(e: &rsandbox::EngineError) -> &'static str {
    use rsandbox::EngineError as E;
    match e {
        E::Input(_) => "bad_input",
        E::Busy(_) | E::AcquireTimeout(_) | E::Capacity(_) => "busy",
        E::Setup(_) | E::LayerRefused { .. } => "sandbox_setup_failed",
        _ => "engine_error",
    }
}

fn engine_error(e: rsandbox::EngineError) -> Reply {
    Reply::Error { code: Some(engine_code(&e).to_string()), message: e.to_string() }
}

struct LibraryFront {
    engine: rsandbox::Engine,
    sessions: Mutex<HashMap<String, Arc<rsandbox::Session>>>,
}

impl LibraryFront {
    /// The table's limits as the library takes them: the engine's one limits type.
    fn options(limits: &Limits, timeout: Option<f64>) -> Result<rsandbox::EvalOptions, rsandbox::EngineError> {
        let limits: rsandbox::Limits = serde_json::from_value(limits.clone())
            .map_err(|e| rsandbox::InputError::BadLimit { what: "limits".into(), value: e.to_string() })?;
        let mut options = limits.apply(rsandbox::EvalOptions::default())?;
        if let Some(t) = timeout {
            options.timeout = Duration::from_secs_f64(t);
        }
        Ok(options)
    }

    fn session(&self, id: &str) -> Arc<rsandbox::Session> {
        self.sessions.lock().unwrap().get(id).cloned().expect("the library front only uses sessions it made")
    }

    fn execute_options(timeout: Option<f64>) -> rsandbox::ExecuteOptions {
        let d = rsandbox::ExecuteOptions::default();
        rsandbox::ExecuteOptions { timeout: timeout.map_or(d.timeout, Duration::from_secs_f64), ..d }
    }
}

fn result_reply(r: Result<rsandbox::EvalResult, rsandbox::EngineError>) -> Reply {
    match r {
        Ok(r) => Reply::Result(serde_json::to_value(r).expect("a result serializes")),
        Err(e) => engine_error(e),
    }
}

impl Front for LibraryFront {
    fn eval(&self, code: &str, timeout: Option<f64>, limits: &Limits) -> Reply {
        match Self::options(limits, timeout) {
            Ok(options) => result_reply(self.engine.eval(code, &options)),
            Err(e) => engine_error(e),
        }
    }
    fn create(&self, limits: &Limits, tools: &[Value], restore: Option<&str>) -> Reply {
        let options = match Self::options(limits, None) {
            Ok(o) => o,
            Err(e) => return engine_error(e),
        };
        let tools = tools
            .iter()
            .map(|t| {
                let policy = t["policy"].as_str().expect("policy").to_string();
                let spec = serde_json::from_value(tool_spec(t)).expect("a tool spec");
                rsandbox::Tool::new(spec, move |args| apply_policy(&policy, &Value::Object(args.clone())))
                    .expect("a valid tool")
            })
            .collect();
        let made = match restore {
            None => self.engine.session(options, tools),
            Some(snapshot) => self.engine.restore_session(options, tools, snapshot).map(|(s, _)| s),
        };
        match made {
            Ok(session) => {
                let id = session.id().to_string();
                self.sessions.lock().unwrap().insert(id.clone(), Arc::new(session));
                Reply::Created(id)
            }
            Err(e) => engine_error(e),
        }
    }
    fn execute(&self, session: &str, code: &str, timeout: Option<f64>) -> Reply {
        result_reply(self.session(session).execute(code, &Self::execute_options(timeout)))
    }
    fn interrupt(&self, session: &str) -> Reply {
        Reply::Interrupted(self.session(session).interrupt())
    }
    fn put_file(&self, session: &str, path: &str, data: &[u8]) -> Reply {
        self.session(session).put_file(path, data).map_or_else(engine_error, |_| Reply::Done)
    }
    fn get_file(&self, session: &str, path: &str) -> Reply {
        use base64::Engine as _;
        match self.session(session).get_file(path) {
            Ok(f) => Reply::Data(base64::engine::general_purpose::STANDARD.decode(f.data_base64).expect("base64")),
            Err(e) => engine_error(e),
        }
    }
    fn list_files(&self, session: &str) -> Reply {
        match self.session(session).list_files() {
            Ok((files, _)) => Reply::Files(files.into_iter().map(|f| f.path).collect()),
            Err(e) => engine_error(e),
        }
    }
    fn snapshot(&self, session: &str) -> Reply {
        self.session(session).snapshot().map_or_else(engine_error, |(s, _)| Reply::Snapshot(s))
    }
    fn close(&self, session: &str) -> Reply {
        self.sessions.lock().unwrap().remove(session).expect("a session the library front made");
        Reply::Closed
    }
    fn restart(&self) -> Reply {
        panic!("the table says the library cannot restart")
    }
}

#[test]
fn library() {
    let engine = rsandbox::Engine::start(rsandbox::EngineConfig::default())
        .expect("engine starts (run cargo build --workspace first: it needs rsandbox-zygote)");
    run_front("library", "library", &LibraryFront { engine, sessions: Mutex::default() });
}

// ---------------------------------------------------------------------------------------
// serve --stdio.
// ---------------------------------------------------------------------------------------

/// Drain a child's stderr, keeping its last lines for failure messages.
fn drain(stderr: impl Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let kept = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut kept = kept.lock().unwrap();
            kept.push(line);
            if kept.len() > 50 {
                kept.remove(0);
            }
        }
    });
    lines
}

fn server_command(args: &[&str]) -> Command {
    let mut command = Command::new(binary());
    command.args(args).env_clear().env("PATH", "/usr/bin:/bin").env("LANG", "C.UTF-8").current_dir("/");
    command.env("RSANDBOX_NODE_ID", "conformance");
    command
}

type Policies = Arc<Mutex<HashMap<String, HashMap<String, String>>>>;

/// One `serve --stdio` process: requests by id, tool calls answered by policy.
struct StdioServer {
    child: Mutex<Child>,
    stdin: Arc<Mutex<ChildStdin>>,
    pending: Arc<Mutex<HashMap<u64, Sender<Value>>>>,
    next: Mutex<u64>,
}

impl StdioServer {
    fn start(policies: Policies) -> StdioServer {
        let mut child = server_command(&["serve", "--stdio"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rsandbox serve --stdio");
        drain(child.stderr.take().unwrap());
        let stdin = Arc::new(Mutex::new(child.stdin.take().unwrap()));
        let pending: Arc<Mutex<HashMap<u64, Sender<Value>>>> = Arc::default();
        let (out, waiting, writer) = (child.stdout.take().unwrap(), pending.clone(), stdin.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let msg: Value = serde_json::from_str(&line).expect("the server writes JSON lines");
                if msg["event"] == "tool_call" {
                    let session = msg["session"].as_str().unwrap_or_default();
                    let tool = msg["tool"].as_str().unwrap_or_default();
                    let policy = policies.lock().unwrap().get(session).and_then(|p| p.get(tool)).cloned();
                    let policy = policy.unwrap_or_else(|| panic!("a call of {tool} nobody declared"));
                    let mut reply = json!({"op": "tool_result", "call": msg["call"]});
                    match apply_policy(&policy, &msg["args"]) {
                        Ok(v) => reply["value"] = v,
                        Err(e) => reply["error"] = json!(e),
                    }
                    writeln!(writer.lock().unwrap(), "{reply}").ok();
                } else if let Some(id) = msg["id"].as_u64() {
                    if let Some(tx) = waiting.lock().unwrap().remove(&id) {
                        tx.send(msg).ok();
                    }
                }
            }
        });
        StdioServer { child: Mutex::new(child), stdin, pending, next: Mutex::new(1) }
    }

    fn request(&self, mut request: Value) -> Value {
        let id = {
            let mut next = self.next.lock().unwrap();
            *next += 1;
            *next
        };
        request["id"] = json!(id);
        let (tx, rx) = channel();
        self.pending.lock().unwrap().insert(id, tx);
        writeln!(self.stdin.lock().unwrap(), "{request}").expect("write a request");
        rx.recv_timeout(STEP_LIMIT).unwrap_or_else(|_| panic!("no answer to {}", clip(&request.to_string())))
    }

    fn stop(&self) {
        let mut child = self.child.lock().unwrap();
        // SAFETY: signalling our own child, not yet reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().ok();
    }
}

struct StdioFront {
    server: Mutex<Arc<StdioServer>>,
    policies: Policies,
}

impl StdioFront {
    fn call(&self, request: Value) -> Value {
        let server = self.server.lock().unwrap().clone();
        server.request(request)
    }

    /// The answer as a reply: an error, or `ok(answer)`.
    fn answer(&self, request: Value, ok: impl FnOnce(&Value) -> Reply) -> Reply {
        let answer = self.call(request);
        match answer.get("error") {
            Some(e) => Reply::Error {
                code: e["code"].as_str().map(String::from),
                message: e["message"].as_str().unwrap_or_default().to_string(),
            },
            None => ok(&answer),
        }
    }
}

impl Front for StdioFront {
    fn eval(&self, code: &str, timeout: Option<f64>, limits: &Limits) -> Reply {
        let mut request = json!({"op": "eval", "code": code, "limits": limits});
        if let Some(t) = timeout {
            request["timeout"] = json!(t);
        }
        self.answer(request, |a| Reply::Result(a["result"].clone()))
    }
    fn create(&self, limits: &Limits, tools: &[Value], restore: Option<&str>) -> Reply {
        let specs: Vec<Value> = tools.iter().map(tool_spec).collect();
        let mut request = json!({"op": "session.create", "limits": limits, "tools": specs});
        if let Some(s) = restore {
            request["restore"] = json!(s);
        }
        let reply = self.answer(request, |a| Reply::Created(a["session"].as_str().expect("session").to_string()));
        if let Reply::Created(id) = &reply {
            let policies =
                tools.iter().map(|t| (t["name"].as_str().unwrap().into(), t["policy"].as_str().unwrap().into()));
            self.policies.lock().unwrap().insert(id.clone(), policies.collect());
        }
        reply
    }
    fn execute(&self, session: &str, code: &str, timeout: Option<f64>) -> Reply {
        let mut request = json!({"op": "session.execute", "session": session, "code": code});
        if let Some(t) = timeout {
            request["timeout"] = json!(t);
        }
        self.answer(request, |a| Reply::Result(a["result"].clone()))
    }
    fn interrupt(&self, session: &str) -> Reply {
        self.answer(json!({"op": "session.interrupt", "session": session}), |a| {
            Reply::Interrupted(a["interrupted"].as_bool().expect("interrupted"))
        })
    }
    fn put_file(&self, session: &str, path: &str, data: &[u8]) -> Reply {
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD.encode(data);
        self.answer(json!({"op": "session.put_file", "session": session, "path": path, "data_base64": data}), |_| {
            Reply::Done
        })
    }
    fn get_file(&self, session: &str, path: &str) -> Reply {
        use base64::Engine as _;
        self.answer(json!({"op": "session.get_file", "session": session, "path": path}), |a| {
            Reply::Data(base64::engine::general_purpose::STANDARD.decode(a["data_base64"].as_str().unwrap()).unwrap())
        })
    }
    fn list_files(&self, session: &str) -> Reply {
        self.answer(json!({"op": "session.list_files", "session": session}), |a| {
            Reply::Files(a["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap().into()).collect())
        })
    }
    fn snapshot(&self, session: &str) -> Reply {
        self.answer(json!({"op": "session.snapshot", "session": session}), |a| {
            Reply::Snapshot(a["snapshot"].as_str().unwrap().into())
        })
    }
    fn close(&self, session: &str) -> Reply {
        self.answer(json!({"op": "session.close", "session": session}), |a| {
            assert_eq!(a["closed"], true, "{a}");
            Reply::Closed
        })
    }
    fn restart(&self) -> Reply {
        let mut server = self.server.lock().unwrap();
        server.stop();
        *server = Arc::new(StdioServer::start(self.policies.clone()));
        Reply::Done
    }
}

#[test]
fn stdio() {
    let policies = Policies::default();
    let front = StdioFront { server: Mutex::new(Arc::new(StdioServer::start(policies.clone()))), policies };
    run_front("stdio", "stdio", &front);
    front.server.lock().unwrap().stop();
}

// ---------------------------------------------------------------------------------------
// serve --http, with a std-only HTTP/1.1 client.
// ---------------------------------------------------------------------------------------

/// A response body, de-chunked as it is read.
struct Body<R> {
    inner: R,
    chunked: bool,
    left: usize,
    done: bool,
}

impl<R: BufRead> Read for Body<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.chunked {
            return self.inner.read(buf);
        }
        if self.done {
            return Ok(0);
        }
        if self.left == 0 {
            let mut line = String::new();
            self.inner.read_line(&mut line)?;
            let size = line.trim().split(';').next().unwrap_or_default();
            self.left = usize::from_str_radix(size, 16).map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, format!("chunk size {line:?}: {e}"))
            })?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let n = buf.len().min(self.left);
        let n = self.inner.read(&mut buf[..n])?;
        self.left -= n;
        if self.left == 0 && n > 0 {
            let mut crlf = String::new();
            self.inner.read_line(&mut crlf)?;
        }
        Ok(n)
    }
}

/// Send one request (`Connection: close`); the status and the body as a reader.
fn http_request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<(&str, &[u8])>,
    accept: &str,
) -> (u16, BufReader<Body<BufReader<TcpStream>>>) {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    stream.set_read_timeout(Some(STEP_LIMIT)).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: {accept}\r\n");
    let bytes = body.map_or(&[][..], |(_, b)| b);
    if let Some((content_type, b)) = body {
        head.push_str(&format!("Content-Type: {content_type}\r\nContent-Length: {}\r\n", b.len()));
    } else if method != "GET" {
        head.push_str("Content-Length: 0\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(bytes)).expect("send a request");
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).expect("a status line");
    let status: u16 = status_line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("a status");
    let mut chunked = false;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("a header line");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("transfer-encoding") && v.trim().eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    (status, BufReader::new(Body { inner: reader, chunked, left: 0, done: false }))
}

/// A path for the URL: every byte but letters, digits, `-`, `_` percent-encoded, so
/// `..`, `/` and empty parts reach the server as the table wrote them.
fn encode_path(path: &str) -> String {
    path.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

struct HttpServer {
    child: Child,
    addr: String,
}

/// The first `http://…` address a server prints on stderr; the rest is drained.
fn announced_address(child: &mut Child) -> String {
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap_or(0) > 0, "the server ended before it said where it listens");
        if let Some(url) = line.split(|c: char| c.is_whitespace() || c == '"').find(|w| w.starts_with("http://")) {
            drain(stderr);
            let addr = url.trim_start_matches("http://");
            return addr.split('/').next().unwrap_or(addr).to_string();
        }
    }
}

impl HttpServer {
    fn start() -> HttpServer {
        let mut child = server_command(&["serve", "--http", "127.0.0.1:0", "--log-format", "text"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rsandbox serve --http");
        let addr = announced_address(&mut child);
        HttpServer { child, addr }
    }

    fn stop(&mut self) {
        // SAFETY: signalling our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        self.child.wait().ok();
    }
}

/// A front whose scenario failed panics out of `run_front`: the server goes with it
/// (a `Child` dropped is not killed, and it outlived the test binary).
impl Drop for HttpServer {
    fn drop(&mut self) {
        // Already reaped by `stop` (a restart scenario) when `try_wait` has the status.
        if matches!(self.child.try_wait(), Ok(None)) {
            self.stop();
        }
    }
}

struct HttpFront {
    server: Mutex<HttpServer>,
    policies: Policies,
}

impl HttpFront {
    fn addr(&self) -> String {
        self.server.lock().unwrap().addr.clone()
    }

    /// A JSON request; a 2xx answer goes to `ok`, anything else is an error reply.
    fn call(&self, method: &str, path: &str, body: Option<&Value>, ok: impl FnOnce(u16, Vec<u8>) -> Reply) -> Reply {
        let bytes = body.map(|b| b.to_string().into_bytes());
        let (status, mut reader) = http_request(
            &self.addr(),
            method,
            path,
            bytes.as_deref().map(|b| ("application/json", b)),
            "application/json",
        );
        let mut text = Vec::new();
        reader.read_to_end(&mut text).expect("read a body");
        if (200..300).contains(&status) {
            return ok(status, text);
        }
        error_reply(status, &text, path)
    }

    fn json(text: &[u8]) -> Value {
        serde_json::from_slice(text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(text)))
    }

    /// An execute whose tool calls this front answers: a server-sent event stream.
    fn execute_streamed(&self, session: &str, body: &Value, policies: HashMap<String, String>) -> Reply {
        let addr = self.addr();
        let path = format!("/v1/sessions/{session}/execute");
        let bytes = body.to_string().into_bytes();
        let (status, mut reader) =
            http_request(&addr, "POST", &path, Some(("application/json", &bytes)), "text/event-stream");
        if !(200..300).contains(&status) {
            let mut text = Vec::new();
            reader.read_to_end(&mut text).ok();
            return error_reply(status, &text, &path);
        }
        let (mut event, mut data) = (String::new(), String::new());
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).expect("read the stream") == 0 {
                return Reply::Error {
                    code: Some("stream ended".into()),
                    message: "the stream ended without a result".into(),
                };
            }
            let l = line.trim_end_matches(['\r', '\n']);
            if let Some(v) = l.strip_prefix("event:") {
                event = v.trim().to_string();
            } else if let Some(v) = l.strip_prefix("data:") {
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            } else if l.is_empty() && !data.is_empty() {
                let payload: Value = serde_json::from_str(&data).expect("an event's data is JSON");
                data.clear();
                match event.as_str() {
                    "result" => return Reply::Result(payload),
                    "error" => {
                        let e = &payload["error"];
                        return Reply::Error {
                            code: e["code"].as_str().map(String::from),
                            message: e["message"].as_str().unwrap_or_default().into(),
                        };
                    }
                    "tool_call" => {
                        let tool = payload["tool"].as_str().unwrap_or_default();
                        let policy = policies.get(tool).unwrap_or_else(|| panic!("a call of {tool} nobody declared"));
                        let reply = match apply_policy(policy, &payload["args"]) {
                            Ok(v) => json!({"value": v}),
                            Err(e) => json!({"error": e}),
                        };
                        let call = payload["call"].as_str().expect("call");
                        let answered = self.call(
                            "POST",
                            &format!("/v1/sessions/{session}/tool_results/{call}"),
                            Some(&reply),
                            |_, _| Reply::Done,
                        );
                        assert!(matches!(answered, Reply::Done), "the tool result was refused: {answered:?}");
                    }
                    _ => {}
                }
            }
        }
    }
}

/// An HTTP error as a reply: the body's code, which must come with the status the core
/// maps it to (the same code names the same failure on every front).
fn error_reply(status: u16, text: &[u8], _path: &str) -> Reply {
    let body: Value = serde_json::from_slice(text).unwrap_or(Value::Null);
    let code = body["error"]["code"].as_str().map(String::from);
    let expected = code.as_deref().and_then(fronts::core::ErrorCode::parse).map_or(status, |c| c.http_status());
    if status != expected {
        // A status that does not go with its code matches no expected code.
        let code = Some(format!("{} with status {status}", code.as_deref().unwrap_or("no code")));
        return Reply::Error { code, message: String::from_utf8_lossy(text).into_owned() };
    }
    Reply::Error { code, message: format!("{status} {}", String::from_utf8_lossy(text)) }
}

impl Front for HttpFront {
    fn eval(&self, code: &str, timeout: Option<f64>, limits: &Limits) -> Reply {
        let mut body = json!({"code": code, "limits": limits});
        if let Some(t) = timeout {
            body["timeout"] = json!(t);
        }
        self.call("POST", "/v1/eval", Some(&body), |_, t| Reply::Result(Self::json(&t)))
    }
    fn create(&self, limits: &Limits, tools: &[Value], restore: Option<&str>) -> Reply {
        let specs: Vec<Value> = tools.iter().map(tool_spec).collect();
        let mut body = json!({"limits": limits, "tools": specs});
        if let Some(s) = restore {
            body["restore"] = json!(s);
        }
        let reply = self.call("POST", "/v1/sessions", Some(&body), |status, t| {
            assert_eq!(status, 201, "a session is created");
            Reply::Created(Self::json(&t)["session"].as_str().expect("session").to_string())
        });
        if let Reply::Created(id) = &reply {
            let policies =
                tools.iter().map(|t| (t["name"].as_str().unwrap().into(), t["policy"].as_str().unwrap().into()));
            self.policies.lock().unwrap().insert(id.clone(), policies.collect());
        }
        reply
    }
    fn execute(&self, session: &str, code: &str, timeout: Option<f64>) -> Reply {
        let mut body = json!({"code": code});
        if let Some(t) = timeout {
            body["timeout"] = json!(t);
        }
        // Bound first: a guard in the match's scrutinee would be held through the
        // request, and a concurrent execute would wait for it.
        let policies = self.policies.lock().unwrap().get(session).filter(|p| !p.is_empty()).cloned();
        match policies {
            Some(policies) => self.execute_streamed(session, &body, policies),
            None => self.call("POST", &format!("/v1/sessions/{session}/execute"), Some(&body), |_, t| {
                Reply::Result(Self::json(&t))
            }),
        }
    }
    fn interrupt(&self, session: &str) -> Reply {
        self.call("POST", &format!("/v1/sessions/{session}/interrupt"), None, |_, t| {
            Reply::Interrupted(Self::json(&t)["interrupted"].as_bool().expect("interrupted"))
        })
    }
    fn put_file(&self, session: &str, path: &str, data: &[u8]) -> Reply {
        let url = format!("/v1/sessions/{session}/files/{}", encode_path(path));
        let (status, mut reader) =
            http_request(&self.addr(), "PUT", &url, Some(("application/octet-stream", data)), "application/json");
        let mut text = Vec::new();
        reader.read_to_end(&mut text).expect("read a body");
        if (200..300).contains(&status) {
            Reply::Done
        } else {
            error_reply(status, &text, &url)
        }
    }
    fn get_file(&self, session: &str, path: &str) -> Reply {
        use base64::Engine as _;
        self.call("GET", &format!("/v1/sessions/{session}/files/{}", encode_path(path)), None, |_, t| {
            let data = Self::json(&t)["data_base64"].as_str().expect("data_base64").to_string();
            Reply::Data(base64::engine::general_purpose::STANDARD.decode(data).expect("base64"))
        })
    }
    fn list_files(&self, session: &str) -> Reply {
        self.call("GET", &format!("/v1/sessions/{session}/files"), None, |_, t| {
            let files = Self::json(&t)["files"].as_array().expect("files").clone();
            Reply::Files(files.iter().map(|f| f["path"].as_str().unwrap().into()).collect())
        })
    }
    fn snapshot(&self, session: &str) -> Reply {
        self.call("POST", &format!("/v1/sessions/{session}/snapshot"), None, |_, t| {
            Reply::Snapshot(Self::json(&t)["snapshot"].as_str().expect("snapshot").into())
        })
    }
    fn close(&self, session: &str) -> Reply {
        self.call("DELETE", &format!("/v1/sessions/{session}"), None, |status, _| {
            assert_eq!(status, 204, "a session is deleted");
            Reply::Closed
        })
    }
    fn restart(&self) -> Reply {
        let mut server = self.server.lock().unwrap();
        server.stop();
        *server = HttpServer::start();
        Reply::Done
    }
}

#[test]
fn http() {
    let front = HttpFront { server: Mutex::new(HttpServer::start()), policies: Policies::default() };
    run_front("http", "http", &front);
}

// ---------------------------------------------------------------------------------------
// The CLI: rsandbox eval --json, through the daemon or not.
// ---------------------------------------------------------------------------------------

struct CliFront {
    /// Environment of each call (the daemon's private runtime directory, or none).
    env: Vec<(String, String)>,
    no_daemon: bool,
}

impl CliFront {
    fn command(&self) -> Command {
        let mut command = server_command(&[]);
        command.env("HOME", std::env::var("HOME").unwrap_or_else(|_| "/root".into()));
        command.env("RSANDBOX_NO_DAEMON", if self.no_daemon { "1" } else { "0" });
        for (k, v) in &self.env {
            command.env(k, v);
        }
        command
    }

    fn run(&self, code: &str, timeout: Option<f64>, limits: &Limits) -> (Option<i32>, String, String) {
        let mut command = self.command();
        // An argument holds at most 128 KiB: longer code goes on stdin.
        let on_stdin = code.len() > 64 * 1024;
        command.arg(if on_stdin { "run" } else { "eval" }).arg("--json");
        if self.no_daemon {
            command.arg("--no-daemon");
        }
        if let Some(t) = timeout {
            command.args(["--timeout", &t.to_string()]);
        }
        for (key, flag) in [
            ("memory", "--memory"),
            ("cpu", "--cpu"),
            ("fsize", "--fsize"),
            ("disk", "--disk"),
            ("nproc", "--nproc"),
            ("nofile", "--nofile"),
            ("max_output", "--max-output"),
        ] {
            match &limits[key] {
                Value::Null => {}
                Value::String(s) => {
                    command.args([flag, s]);
                }
                other => {
                    command.args([flag, &other.to_string()]);
                }
            }
        }
        command.arg(if on_stdin { "-" } else { code });
        command.stdin(if on_stdin { Stdio::piped() } else { Stdio::null() });
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run rsandbox");
        if on_stdin {
            let mut pipe = child.stdin.take().unwrap();
            let bytes = code.as_bytes().to_vec();
            std::thread::spawn(move || pipe.write_all(&bytes).ok());
        }
        let out = child.wait_with_output().expect("rsandbox runs");
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
    }
}

impl Front for CliFront {
    fn eval(&self, code: &str, timeout: Option<f64>, limits: &Limits) -> Reply {
        let (status, stdout, stderr) = self.run(code, timeout, limits);
        match serde_json::from_str::<Value>(stdout.trim()) {
            Ok(result) if result.get("outcome").is_some() => Reply::Result(result),
            _ => Reply::Error {
                code: match status {
                    Some(2) => Some("bad_input".into()),
                    Some(11) => Some("sandbox_setup_failed".into()),
                    other => Some(format!("exit {other:?} without a result")),
                },
                message: format!("exit {status:?}: {}", clip(&stderr)),
            },
        }
    }
    fn create(&self, _: &Limits, _: &[Value], _: Option<&str>) -> Reply {
        panic!("the table says the CLI has no sessions")
    }
    fn execute(&self, _: &str, _: &str, _: Option<f64>) -> Reply {
        panic!("the table says the CLI has no sessions")
    }
    fn interrupt(&self, _: &str) -> Reply {
        panic!("the table says the CLI has no sessions")
    }
    fn put_file(&self, _: &str, _: &str, _: &[u8]) -> Reply {
        panic!("the table says the CLI has no sessions")
    }
    fn get_file(&self, _: &str, _: &str) -> Reply {
        panic!("the table says the CLI has no sessions")
    }
    fn list_files(&self, _: &str) -> Reply {
        panic!("the table says the CLI has no sessions")
    }
    fn snapshot(&self, _: &str) -> Reply {
        panic!("the table says the CLI has no sessions")
    }
    fn close(&self, _: &str) -> Reply {
        panic!("the table says the CLI has no sessions")
    }
    fn restart(&self) -> Reply {
        panic!("the table says the CLI has no sessions")
    }
}

#[test]
fn cli_no_daemon() {
    run_front("cli_no_daemon", "cli", &CliFront { env: Vec::new(), no_daemon: true });
}

/// A fresh `XDG_RUNTIME_DIR` of this test's own (mode 0700), for a private daemon.
fn private_runtime_dir(tag: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let base = std::env::temp_dir().join(format!("rsandbox-conformance-{tag}-{}", std::process::id()));
    std::fs::remove_dir_all(&base).ok();
    std::fs::create_dir(&base).unwrap();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700)).unwrap();
    base
}

/// The pid the daemon under `runtime_dir` wrote, once it has.
fn daemon_pid(runtime_dir: &Path) -> Option<u32> {
    let dir = runtime_dir.join("rsandbox");
    let pid_file =
        std::fs::read_dir(dir).ok()?.flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "pid"))?;
    std::fs::read_to_string(pid_file).ok()?.trim().parse().ok()
}

/// Through a daemon of this test's own (a private `XDG_RUNTIME_DIR`), started by a
/// first call and checked to be the one answering before the table runs.
#[test]
fn cli_daemon() {
    let base = private_runtime_dir("daemon");
    let env = vec![
        ("XDG_RUNTIME_DIR".to_string(), base.to_str().unwrap().to_string()),
        ("RSANDBOX_DAEMON_IDLE".to_string(), "300".to_string()),
    ];
    let front = CliFront { env, no_daemon: false };
    // The first call starts the daemon; wait for its pid file.
    let served_by = "basename(dirname(getwd()))";
    assert!(matches!(front.eval(served_by, None, &json!({})), Reply::Result(_)));
    let dir = base.join("rsandbox");
    let deadline = Instant::now() + Duration::from_secs(60);
    let daemon = loop {
        let sock = std::fs::read_dir(&dir)
            .ok()
            .is_some_and(|d| d.flatten().any(|e| e.path().extension().is_some_and(|x| x == "sock")));
        if let (true, Some(pid)) = (sock, daemon_pid(&base)) {
            break pid;
        }
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(50));
    };
    // Workspaces live in rsandbox-<supervisor pid>-…: the daemon answers now.
    let Reply::Result(r) = front.eval(served_by, None, &json!({})) else { panic!("no result") };
    let supervisor: u32 =
        r["value"].as_str().and_then(|v| v.split('-').nth(1)).and_then(|p| p.parse().ok()).unwrap_or(0);
    assert_eq!(supervisor, daemon, "the daemon serves the calls: {r}");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_front("cli_daemon", "cli", &front)));
    front.command().args(["daemon", "--stop"]).output().ok();
    std::fs::remove_dir_all(&base).ok();
    result.unwrap_or_else(|e| std::panic::resume_unwind(e));
}

// ---------------------------------------------------------------------------------------
// MCP, through the official Python SDK.
// ---------------------------------------------------------------------------------------

fn mcp_python() -> PathBuf {
    if let Some(p) = std::env::var_os("RSANDBOX_MCP_PYTHON") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache/rsandbox/mcp-venv/bin/python")
}

#[test]
fn mcp() {
    let python = mcp_python();
    assert!(
        python.exists(),
        "{} is missing: run scripts/install-deps.sh (it makes the venv with the MCP Python SDK)",
        python.display()
    );
    let script = repo_root().join("tests/conformance/mcp_runner.py");
    let started = Instant::now();
    let out = Command::new(&python)
        .arg(&script)
        .arg(table_path())
        .arg(binary())
        .stdin(Stdio::null())
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    println!("mcp: {:.1} s in all", started.elapsed().as_secs_f64());
    assert!(out.status.success(), "the MCP runner failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.lines().any(|l| l.starts_with("ok ")), "no scenario ran:\n{stdout}");
}

// ---------------------------------------------------------------------------------------
// Every front, stopped the way its users stop it, leaves no directory behind.
// ---------------------------------------------------------------------------------------

/// Wait for a server to end of itself; its exit status.
fn ended_within(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait for the server") {
            return status;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            panic!("the server did not stop within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `serve --stdio`, `mcp` on stdio, `serve --http`, `mcp --http` and the per-user
/// daemon: each answers a first request (so sandboxes are being forked ahead), is
/// stopped as its users stop it (its input closed; SIGTERM; `daemon --stop`), exits
/// cleanly, and leaves none of its directories in `/tmp` or `/dev/shm`.
#[test]
fn every_front_stopped_leaves_no_directory_behind() {
    let sigterm = |child: &Child| {
        // SAFETY: signalling our own child, not yet reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    };
    let check = |front: &str, pid: u32, status: std::process::ExitStatus| {
        assert!(status.success(), "{front}: ended with {status}");
        let left = engine_dirs_of(pid);
        assert!(left.is_empty(), "{front} left behind: {left:?}");
    };

    // serve --stdio: one evaluation, then its input closes.
    let mut child = server_command(&["serve", "--stdio"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, r#"{{"op":"eval","id":1,"code":"1+1"}}"#).unwrap();
    let mut answer = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut answer).unwrap();
    assert!(answer.contains(r#""outcome":"ok""#), "serve --stdio: {answer}");
    assert!(!engine_dirs_of(child.id()).is_empty(), "serve --stdio made no directory where the test looks");
    drop(stdin);
    let status = ended_within(&mut child, STEP_LIMIT);
    check("serve --stdio", child.id(), status);

    // mcp on stdio: initialized, then its input closes.
    let mut child = server_command(&["mcp"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "conformance", "version": "1"}}});
    writeln!(stdin, "{initialize}").unwrap();
    let mut answer = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut answer).unwrap();
    assert!(answer.contains("serverInfo"), "mcp: {answer}");
    drop(stdin);
    let status = ended_within(&mut child, STEP_LIMIT);
    check("mcp (stdio)", child.id(), status);

    // serve --http: one evaluation, then SIGTERM.
    let mut server = HttpServer::start();
    let body = json!({"code": "1+1"}).to_string();
    let (status, _) =
        http_request(&server.addr, "POST", "/v1/eval", Some(("application/json", body.as_bytes())), "application/json");
    assert_eq!(status, 200, "serve --http");
    sigterm(&server.child);
    let status = ended_within(&mut server.child, STEP_LIMIT);
    check("serve --http", server.child.id(), status);

    // mcp --http: listening, then SIGTERM.
    let mut child =
        server_command(&["mcp", "--http", "127.0.0.1:0"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    announced_address(&mut child);
    sigterm(&child);
    let status = ended_within(&mut child, STEP_LIMIT);
    check("mcp --http", child.id(), status);

    // The daemon: started by a first evaluation, stopped with `daemon --stop`.
    let base = private_runtime_dir("stop");
    let front =
        CliFront { env: vec![("XDG_RUNTIME_DIR".to_string(), base.to_str().unwrap().to_string())], no_daemon: false };
    let served_by = "basename(dirname(getwd()))";
    let deadline = Instant::now() + STEP_LIMIT;
    // The first calls may run without the daemon while it starts; wait until it answers.
    let daemon = loop {
        let Reply::Result(r) = front.eval(served_by, None, &json!({})) else { panic!("no result") };
        let pid: Option<u32> = r["value"].as_str().and_then(|v| v.split('-').nth(1)).and_then(|p| p.parse().ok());
        let daemon = daemon_pid(&base);
        if pid.is_some() && pid == daemon {
            break daemon.unwrap();
        }
        assert!(Instant::now() < deadline, "the daemon did not start serving");
        std::thread::sleep(Duration::from_millis(100));
    };
    // A client that stays connected, idle after one answer: its connection's thread holds
    // the daemon's engine, which must still be dropped (its directories with it) when
    // the daemon stops (it exited with them left behind while a connection was served).
    let socket = std::fs::read_dir(base.join("rsandbox"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "sock"))
        .expect("the daemon's socket");
    let mut idle_client = std::os::unix::net::UnixStream::connect(&socket).expect("connect to the daemon");
    writeln!(idle_client, r#"{{"op":"eval","id":1,"code":"1+1"}}"#).unwrap();
    let mut answer = String::new();
    BufReader::new(&idle_client).read_line(&mut answer).unwrap();
    assert!(answer.contains(r#""outcome":"ok""#), "the daemon's socket: {answer}");
    let stopped = front.command().args(["daemon", "--stop"]).output().expect("daemon --stop runs");
    // Running, or a zombie its reaper has not collected yet.
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
    };
    let deadline = Instant::now() + STEP_LIMIT;
    while alive(daemon) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::remove_dir_all(&base).ok();
    assert!(stopped.status.success(), "daemon --stop: {}", String::from_utf8_lossy(&stopped.stderr));
    assert!(!alive(daemon), "the daemon did not stop");
    let left = engine_dirs_of(daemon);
    assert!(left.is_empty(), "the daemon left behind: {left:?}");
    // The daemon ended the idle client's connection on its way out.
    let mut rest = String::new();
    assert_eq!(BufReader::new(&idle_client).read_line(&mut rest).unwrap(), 0, "after the stop: {rest}");
}
