//! Library-level tests against a real zygote and real R: fresh evaluations, sessions
//! and their automatic resets, host tools of every argument type, the host-side checks,
//! the pool, and the audit log. Needs `cargo build --workspace` first (the zygote binary).
#![allow(clippy::undocumented_unsafe_blocks)]

use rsandbox::session::ExecuteOptions;
use rsandbox::{ArgType, Engine, EngineConfig, EngineError, EvalOptions, Outcome, Pool, Tool, ToolSpec};
use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        Engine::start(EngineConfig::default()).expect("engine starts (did you run cargo build --workspace?)")
    })
}

fn tool(
    name: &str,
    args: &[(&str, ArgType)],
    handler: impl Fn(&serde_json::Map<String, Value>) -> Result<Value, String> + Send + Sync + 'static,
) -> Tool {
    let spec = ToolSpec {
        name: name.into(),
        description: format!("test tool {name}"),
        args: args.iter().map(|(n, t)| (n.to_string(), *t)).collect::<rsandbox::tools::ToolArgs>(),
    };
    Tool::new(spec, handler).unwrap()
}

fn exec(options: ExecuteOptions) -> ExecuteOptions {
    options
}

fn quick() -> ExecuteOptions {
    ExecuteOptions { timeout: Duration::from_secs(10), ..ExecuteOptions::default() }
}

#[test]
fn fresh_evaluations_share_no_state() {
    let e = engine();
    let first = e.eval("x <- 41; x + 1", &EvalOptions::default()).unwrap();
    assert_eq!(first.outcome, Outcome::Ok);
    assert_eq!(first.value, json!(42));
    let second = e.eval("exists('x')", &EvalOptions::default()).unwrap();
    assert_eq!(second.value, json!(false));
}

#[test]
fn an_error_carries_the_calls_that_led_to_it_as_text() {
    let s = engine().session(EvalOptions::default(), Vec::new()).unwrap();
    let r = s.execute("f <- function() g(1); g <- function(x) stop('x'); f()", &quick()).unwrap();
    let error = r.error.unwrap();
    assert_eq!((error.message.as_str(), error.call.as_deref()), ("x", Some("g(1)")));
    assert_eq!(error.trace, ["f()", "g(1)", "stop(\"x\")"]);
    // Deep recursion: only the innermost calls travel.
    let r = s.execute("h <- function(n) if (n == 0) stop('deep') else h(n - 1); h(500)", &quick()).unwrap();
    let trace = r.error.unwrap().trace;
    assert_eq!(trace.len(), rsandbox::result::RError::MAX_TRACE);
    assert_eq!(trace.last().unwrap(), "stop(\"deep\")");
    // A syntax error ran nothing: no trace.
    assert!(s.execute("f(", &quick()).unwrap().error.unwrap().trace.is_empty());
}

#[test]
fn session_state_persists_between_executes() {
    let s = engine().session(EvalOptions::default(), vec![]).unwrap();
    assert!(!s.execute("x <- 20", &quick()).unwrap().visible);
    let r = s.execute("x * 2 + 2", &quick()).unwrap();
    assert_eq!(r.value, json!(42));
    assert!(!r.reset);
    assert_eq!(r.stdout, "[1] 42\n", "each execute reports only its own output");
}

#[test]
fn session_resets_after_a_timeout_its_code_ignores_and_next_call_works() {
    let s = engine().session(EvalOptions::default(), vec![]).unwrap();
    s.execute("x <- 1; m <- matrix(runif(9e6), 3000)", &quick()).unwrap();
    // Native code (reference BLAS) that never checks for interrupts: after the grace
    // period the child is killed.
    let r = s
        .execute(
            "for (i in 1:20) m2 <- m %*% m",
            &exec(ExecuteOptions { timeout: Duration::from_millis(500), ..quick() }),
        )
        .unwrap();
    assert_eq!(r.outcome, Outcome::Timeout);
    assert!(r.reset);
    assert_eq!(r.reset_reason.as_deref(), Some("timeout"));
    let next = s.execute("exists('x')", &quick()).unwrap();
    assert_eq!(next.outcome, Outcome::Ok);
    assert_eq!(next.value, json!(false), "a reset session starts from a clean R");
}

#[test]
fn session_resets_after_memory_limit_crash_and_quit() {
    let options = EvalOptions { memory: Some(64 << 20), ..EvalOptions::default() };
    let s = engine().session(options, vec![]).unwrap();
    // An R-level allocation failure leaves R usable: no reset needed.
    let r = s.execute("x <- numeric(1e9)", &quick()).unwrap();
    assert_eq!(r.outcome, Outcome::MemoryLimit);
    assert!(r.error.unwrap().message.starts_with("cannot allocate vector of size"));
    let r = s.execute("tools::pskill(Sys.getpid(), 11L)", &quick()).unwrap();
    assert_eq!(r.outcome, Outcome::Crashed);
    assert_eq!(r.exit.signal, Some(libc_sigsegv()));
    assert_eq!(r.reset_reason.as_deref(), Some("crashed"));
    assert_eq!(s.execute("1 + 1", &quick()).unwrap().value, json!(2));
    let r = s.execute("y <- 1; quit(status = 0)", &quick()).unwrap();
    assert_eq!(r.outcome, Outcome::Ok);
    assert_eq!(r.reset_reason.as_deref(), Some("quit"));
    assert_eq!(s.execute("exists('y')", &quick()).unwrap().value, json!(false));
}

fn libc_sigsegv() -> i32 {
    11
}

#[test]
fn concurrent_execute_on_one_session_is_busy() {
    let s = Arc::new(engine().session(EvalOptions::default(), vec![]).unwrap());
    let s2 = s.clone();
    let slow = std::thread::spawn(move || s2.execute("Sys.sleep(1.5); 'done'", &quick()));
    std::thread::sleep(Duration::from_millis(400));
    match s.execute("1", &quick()) {
        Err(EngineError::Busy(id)) => assert_eq!(id, s.id()),
        other => panic!("expected busy, got {other:?}"),
    }
    assert_eq!(slow.join().unwrap().unwrap().value, json!("done"));
    assert_eq!(s.execute("1", &quick()).unwrap().value, json!(1), "free again afterwards");
}

fn typed_tools() -> Vec<Tool> {
    let echo = |a: &serde_json::Map<String, Value>| Ok(a["x"].clone());
    vec![
        tool("add", &[("a", ArgType::Numeric), ("b", ArgType::Numeric)], |a| {
            Ok(json!(a["a"].as_f64().unwrap() + a["b"].as_f64().unwrap()))
        }),
        tool("echo_num", &[("x", ArgType::Numeric)], echo),
        tool("echo_int", &[("x", ArgType::Integer)], echo),
        tool("echo_chr", &[("x", ArgType::Character)], echo),
        tool("echo_lgl", &[("x", ArgType::Logical)], echo),
        tool("echo_list", &[("x", ArgType::List)], echo),
        tool("echo_df", &[("x", ArgType::DataFrame)], echo),
        tool("echo_any", &[("x", ArgType::Any)], echo),
        tool("fail", &[], |_| Err("the host said no".into())),
        tool("table", &[], |_| Ok(json!([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]))),
    ]
}

#[test]
fn tool_calls_round_trip_every_argument_type() {
    let s = engine().session(EvalOptions::default(), typed_tools()).unwrap();
    let cases = [
        ("add(1, 2)", json!(3)),
        ("echo_num(c(1.5, NA, 3))", json!([1.5, null, 3])),
        ("echo_int(5L)", json!(5)),
        ("echo_chr(c('a', 'b'))", json!(["a", "b"])),
        ("echo_lgl(c(TRUE, FALSE))", json!([true, false])),
        ("echo_list(list(k = 1, v = 'x'))", json!({"k": 1, "v": "x"})),
        ("echo_df(data.frame(x = 1:2, y = c('a', 'b')))", json!([{"x": 1, "y": "a"}, {"x": 2, "y": "b"}])),
        ("echo_any(NULL)", json!(null)),
        // An array of only nulls comes back as R's NAs, not as a list of NULLs.
        ("identical(echo_lgl(c(NA, NA)), c(NA, NA))", json!(true)),
        ("identical(echo_any(list(NULL)), NA)", json!(true)),
        ("d <- table(); c(class(d), nrow(d), d$name[2])", json!(["data.frame", "2", "b"])),
    ];
    for (code, want) in cases {
        let r = s.execute(code, &quick()).unwrap();
        assert_eq!(r.outcome, Outcome::Ok, "{code}: {:?}", r.error);
        assert_eq!(r.value, want, "{code}");
    }
    assert!(
        s.execute("is.function(add) && bindingIsLocked('add', as.environment('rsandbox:tools'))", &quick())
            .unwrap()
            .value
            == json!(true)
    );
}

#[test]
fn host_checks_names_types_unknown_tools_and_handler_errors() {
    let s = engine().session(EvalOptions::default(), typed_tools()).unwrap();
    let error_of = |code: &str| {
        let r = s.execute(code, &quick()).unwrap();
        assert_eq!(r.outcome, Outcome::Error, "{code}");
        r.error.unwrap().message
    };
    assert_eq!(error_of("add('one', 2)"), "Tool 'add': argument 'a' must be numeric, got character");
    assert_eq!(error_of("add(1)"), "Tool 'add': missing argument 'b'");
    let not_integer = "Tool 'echo_int': argument 'x' must be integer (whole numbers within ±2147483647), got numeric";
    assert_eq!(error_of("echo_int(1.5)"), not_integer);
    // Whole, but beyond R's 32-bit integers (and beyond what JSON numbers hold exactly).
    assert_eq!(error_of("echo_int(1e308)"), not_integer);
    assert_eq!(error_of("echo_int(c(1, 2^31))"), not_integer);
    assert_eq!(s.execute("echo_int(2147483647)", &quick()).unwrap().value, json!(2147483647));
    assert_eq!(error_of("echo_df(1:3)"), "Tool 'echo_df': argument 'x' must be data_frame, got numeric");
    assert_eq!(error_of("fail()"), "the host said no");
    // Going around the stubs: the host is the boundary, not the R function. The raw
    // bridge returns list(value, error) instead of raising.
    let refused = |code: &str| {
        let r = s.execute(&format!("{code}$error"), &quick()).unwrap();
        r.value.as_str().unwrap_or_default().to_string()
    };
    assert_eq!(refused(r#".Call("rsandbox_tool_call", "system", "{}")"#), "unknown tool \"system\"");
    assert_eq!(
        refused(r#".Call("rsandbox_tool_call", "add", '{"a":1,"b":2,"cmd":"id"}')"#),
        "Tool 'add': unknown argument \"cmd\""
    );
    assert!(refused(r#".Call("rsandbox_tool_call", "add", "not json")"#).starts_with("arguments are not JSON"));
    let big = error_of("echo_chr(strrep('x', 2e6))");
    assert!(big.contains("exceeds the limit of 1048576"), "{big}");
    assert_eq!(s.execute("add(2, 3)", &quick()).unwrap().value, json!(5), "the session still works");
}

#[test]
fn call_flood_hits_the_cap_then_the_session_resets_and_works() {
    let s = engine().session(EvalOptions::default(), typed_tools()).unwrap();
    s.execute("kept <- 1", &quick()).unwrap();
    let r = s
        .execute("n <- 0; for (i in 1:100000) n <- n + add(1, 0); n", &ExecuteOptions { max_tool_calls: 50, ..quick() })
        .unwrap();
    assert_eq!(r.outcome, Outcome::Error);
    assert_eq!(r.error.unwrap().message, "tool call limit of 50 per execute exceeded");
    assert!(r.tool_call_limit_exceeded);
    assert_eq!(r.reset_reason.as_deref(), Some("tool_call_limit"));
    let next = s.execute("c(exists('kept'), add(1, 1))", &quick()).unwrap();
    assert_eq!(next.value, json!([0, 2]), "fresh session (kept is gone), tools still work");
}

#[test]
fn pool_serves_concurrently_and_reports_status() {
    let pool = Arc::new(Pool::new(engine().clone(), 2, EvalOptions::default(), Duration::from_secs(30)).unwrap());
    let status = pool.status();
    assert_eq!((status.idle, status.busy, status.size), (2, 0, 2));
    let handles: Vec<_> = (0..6)
        .map(|i| {
            let pool = pool.clone();
            std::thread::spawn(move || pool.eval(&format!("Sys.sleep(0.2); {i} * 2"), None).unwrap())
        })
        .collect();
    let values: Vec<Value> = handles.into_iter().map(|h| h.join().unwrap().value).collect();
    assert_eq!(values, (0..6).map(|i| json!(i * 2)).collect::<Vec<_>>());
    assert_eq!(pool.status().busy, 0);
    let short = Pool::new(engine().clone(), 1, EvalOptions::default(), Duration::from_millis(200)).unwrap();
    let short = Arc::new(short);
    let s2 = short.clone();
    let hog = std::thread::spawn(move || s2.eval("Sys.sleep(1.5)", None));
    std::thread::sleep(Duration::from_millis(300));
    assert!(matches!(short.eval("1", None), Err(EngineError::AcquireTimeout(_))));
    hog.join().unwrap().unwrap();
}

#[test]
fn audit_log_records_every_event() {
    let dir = std::env::temp_dir().join(format!("rsandbox-audit-engine-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("audit.jsonl");
    let config = EngineConfig { audit_log: Some(path.clone()), ..EngineConfig::default() };
    let e = Engine::start(config).unwrap();
    {
        let s = e.session(EvalOptions::default(), typed_tools()).unwrap();
        s.execute("add(1, 2)", &quick()).unwrap();
        s.execute("stop('as planned')", &quick()).unwrap();
        s.execute("system('id')", &quick()).unwrap();
        s.execute("Sys.sleep(5)", &ExecuteOptions { timeout: Duration::from_millis(300), ..quick() }).unwrap();
    }
    let lines: Vec<Value> =
        std::fs::read_to_string(&path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let events: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    // securer's names where it has the event (execute_error, execute_timeout).
    let wanted = [
        "session_start",
        "execute_start",
        "tool_call",
        "tool_result",
        "execute_complete",
        "execute_error",
        "execute_timeout",
    ];
    for want in wanted.into_iter().chain(["violation", "limit", "session_reset", "session_close"]) {
        assert!(events.contains(&want), "missing {want} in {events:?}");
    }
    assert!(lines.iter().all(|l| l["ts"].as_str().is_some_and(|t| t.ends_with('Z')) && l["session"].is_string()));
    let violation = lines.iter().find(|l| l["event"] == "violation").unwrap();
    assert_eq!(violation["syscall"], "execve");
    let reset = lines.iter().find(|l| l["event"] == "session_reset").unwrap();
    assert_eq!(reset["reason"], "violation");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Compile a tiny native library that writes raw bytes on the child's channel (fd 3),
/// and return R code that writes it into the workspace, loads it and calls `mode`.
fn raw_frame_code(mode: i32) -> String {
    let dir = std::env::temp_dir().join(format!("rsandbox-raw-frames-{}-{mode}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("probe.c");
    std::fs::write(
        &src,
        r#"#include <unistd.h>
void rsb_raw(int *mode) {
    if (*mode == 1) { write(3, "\0\0\0\x05hello", 9); }          /* a frame that is not JSON */
    if (*mode == 2) { write(3, "\xff\xff\xff\xff", 4); }          /* a 4 GiB length prefix */
    if (*mode == 3) { for (int i = 0; i < 100000; i++) write(3, "\0\0\0\x02{}", 6); } /* a flood */
    sleep(5);
}
"#,
    )
    .unwrap();
    let so = dir.join("probe.so");
    let status =
        std::process::Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&so).arg(&src).status().expect("cc runs");
    assert!(status.success());
    let bytes = std::fs::read(&so).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "h <- '{hex}'; n <- nchar(h); writeBin(as.raw(strtoi(substring(h, seq(1, n, 2), seq(2, n, 2)), 16L)), 'probe.so'); \
         dyn.load('probe.so'); .C('rsb_raw', {mode}L); 'unreachable'"
    )
}

#[test]
fn raw_frames_from_the_child_end_it_and_the_supervisor_keeps_serving() {
    let s = engine().session(EvalOptions::default(), typed_tools()).unwrap();
    for mode in [1, 2, 3] {
        let r = s.execute(&raw_frame_code(mode), &quick()).unwrap();
        assert_eq!(r.outcome, Outcome::Crashed, "mode {mode}: {:?}", r.error);
        let message = r.error.unwrap().message;
        assert!(message.starts_with("the sandbox broke protocol"), "mode {mode}: {message}");
        assert!(r.reset, "mode {mode}");
        assert_eq!(s.execute("add(1, 1)", &quick()).unwrap().value, json!(2), "mode {mode}: next call works");
    }
}

#[test]
fn pooled_sessions_keep_state_and_reset_between_uses_when_asked() {
    let resetting = Pool::new(engine().clone(), 1, EvalOptions::default(), Duration::from_secs(30)).unwrap();
    {
        let mut s = resetting.session().unwrap();
        s.execute("secret <- 42", None).unwrap();
        assert_eq!(s.execute("secret", None).unwrap().value, json!(42), "state kept within one borrow");
    }
    let mut s = resetting.session().unwrap();
    assert_eq!(s.execute("exists('secret')", None).unwrap().value, json!(false), "the next borrower starts clean");
    drop(s);

    let keeping = Pool::new(engine().clone(), 1, EvalOptions::default(), Duration::from_secs(30))
        .unwrap()
        .reset_between_uses(false);
    keeping.session().unwrap().execute("kept <- 'yes'", None).unwrap();
    let mut s = keeping.session().unwrap();
    assert_eq!(s.execute("kept", None).unwrap().value, json!("yes"));
    let r = s.execute("Sys.sleep(5)", Some(Duration::from_millis(300))).unwrap();
    assert_eq!((r.outcome, r.reset), (Outcome::Timeout, true));
    assert_eq!(s.execute("exists('kept')", None).unwrap().value, json!(false), "replaced after the timeout");
}

#[test]
fn random_numbers_differ_between_children_and_continue_within_a_session() {
    let e = engine();
    let draw = || e.eval("runif(1)", &EvalOptions::default()).unwrap().value;
    assert_ne!(draw(), draw(), "two fresh children must not share a seed");
    let s = e.session(EvalOptions::default(), vec![]).unwrap();
    s.execute("set.seed(7)", &quick()).unwrap();
    let in_session = [s.execute("runif(1)", &quick()).unwrap().value, s.execute("runif(1)", &quick()).unwrap().value];
    let reference = e.eval("set.seed(7); c(runif(1), runif(1))", &EvalOptions::default()).unwrap().value;
    assert_eq!(json!(in_session), reference, "set.seed in one execute governs the next");
}

#[test]
fn a_dead_zygote_is_restarted_on_the_next_request() {
    let e = Engine::start(EngineConfig::default()).unwrap();
    assert_eq!(e.eval("1", &EvalOptions::default()).unwrap().value, json!(1));
    let old = e.info().pid;
    // SAFETY: signalling the zygote this test started.
    assert_eq!(unsafe { libc::kill(old as i32, libc::SIGKILL) }, 0);
    // The next request may race the engine noticing; within a few tries it must work
    // on a fresh zygote.
    let mut result = None;
    for _ in 0..50 {
        match e.eval("2", &EvalOptions::default()) {
            Ok(r) => {
                result = Some(r);
                break;
            }
            Err(EngineError::ZygoteGone(_)) => std::thread::sleep(Duration::from_millis(100)),
            Err(other) => panic!("unexpected error after the zygote died: {other}"),
        }
    }
    assert_eq!(result.expect("the engine recovered").value, json!(2));
    assert_ne!(e.info().pid, old, "a new zygote serves");
}

fn preforking_engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| Engine::start(EngineConfig { prefork: 2, ..EngineConfig::default() }).expect("engine starts"))
}

fn wait_for_idle(e: &Engine, at_least: usize) -> rsandbox::WarmStatus {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let status = e.warm_status();
        if status.idle >= at_least || std::time::Instant::now() > deadline {
            return status;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_preforking_engine_serves_evals_and_sessions_from_waiting_children() {
    let e = preforking_engine();
    let before = wait_for_idle(e, 2);
    assert_eq!((before.idle, before.limit_sets, before.per_set), (2, 1, 2), "{before:?}");
    let pid = |r: &rsandbox::EvalResult| r.value.as_i64().unwrap();
    let first = e.eval("Sys.getpid()", &EvalOptions::default()).unwrap();
    assert_eq!(first.outcome, Outcome::Ok);
    // A waiting child was used: fewer idle now, until the replenisher forks again.
    let second = e.eval("exists('x')", &EvalOptions::default()).unwrap();
    assert_eq!(second.value, json!(false), "children share no state");
    assert_ne!(pid(&first), e.eval("Sys.getpid()", &EvalOptions::default()).map(|r| pid(&r)).unwrap());
    // Each waiting child evaluated `1 + 1` on its own before its lockdown: its first
    // request sees none of it (no output, nothing in the global environment but the
    // child's own seed), and the warm-up ran in the child, not as a request.
    wait_for_idle(e, 2);
    let output = e.eval("cat('x')", &EvalOptions::default()).unwrap();
    assert_eq!((output.outcome, output.stdout.as_str()), (Outcome::Ok, "x"), "{output:?}");
    let globals = e.eval("setdiff(ls(all.names = TRUE), '.Random.seed')", &EvalOptions::default()).unwrap();
    assert_eq!(globals.value, json!([]), "{globals:?}");

    // A session with tools takes a waiting child and defines its tools in it.
    wait_for_idle(e, 2);
    let add = tool("add", &[("a", ArgType::Numeric), ("b", ArgType::Numeric)], |a| {
        Ok(json!(a["a"].as_f64().unwrap() + a["b"].as_f64().unwrap()))
    });
    let s = e.session(EvalOptions::default(), vec![add]).unwrap();
    let r = s.execute("y <- add(2, 3); y * 2", &quick()).unwrap();
    assert_eq!((r.outcome, r.value.as_f64()), (Outcome::Ok, Some(10.0)), "{r:?}");
    // After a reset the session's new child has the tools too.
    let reset = s.execute("quit(status = 0)", &quick()).unwrap();
    assert!(reset.reset);
    let again = s.execute("exists('y'); add(1, 1)", &quick()).unwrap();
    assert_eq!(again.value.as_f64(), Some(2.0), "{again:?}");

    // Another limit set gets its own children.
    let small = EvalOptions { memory: Some(512 << 20), ..EvalOptions::default() };
    assert_eq!(e.eval("1 + 1", &small).unwrap().value, json!(2));
    assert_eq!(wait_for_idle(e, 4).limit_sets, 2);
}

#[test]
fn children_made_while_nobody_waits_are_settled_and_serve_as_any_other() {
    // An engine of its own: the shared one's counts depend on the other tests.
    let e = Engine::start(EngineConfig { prefork: 2, ..EngineConfig::default() }).expect("engine starts");
    let full = wait_for_idle(&e, 2);
    // Both children were made with no request waiting and no replacement due, so each
    // had its warm-up's garbage collected before it joined the set.
    assert_eq!((full.idle, full.settled), (2, 2), "{full:?}");
    // The collection ran as our own code between requests: a first request sees nothing
    // of it (no output, nothing bound but the child's seed) and runs as on any child.
    let first = e.eval("1 + 1", &EvalOptions::default()).unwrap();
    assert_eq!((first.outcome, first.stdout.as_str(), &first.value), (Outcome::Ok, "[1] 2\n", &json!(2)), "{first:?}");
    let globals = e.eval("setdiff(ls(all.names = TRUE), '.Random.seed')", &EvalOptions::default()).unwrap();
    assert_eq!(globals.value, json!([]), "{globals:?}");
    // Allocation after the collection: a session on a settled child builds and keeps data.
    wait_for_idle(&e, 2);
    let s = e.session(EvalOptions::default(), vec![]).unwrap();
    let made = s.execute("x <- lapply(1:20000, function(i) c(i, i)); length(x)", &quick()).unwrap();
    assert_eq!(made.value, json!(20000), "{made:?}");
    let kept = s.execute("sum(vapply(x, sum, 0))", &quick()).unwrap();
    assert_eq!(kept.value.as_f64(), Some(400_020_000.0), "{kept:?}");
}

#[test]
fn while_a_long_request_runs_the_set_refills_once_it_runs_dry() {
    let e = Engine::start(EngineConfig { prefork: 2, ..EngineConfig::default() }).expect("engine starts");
    assert_eq!(wait_for_idle(&e, 2).idle, 2);
    let long = {
        let e = e.clone();
        std::thread::spawn(move || e.eval("Sys.sleep(4); 1", &EvalOptions::default()).unwrap())
    };
    // The long request holds one child; taking the other empties the set, and then both
    // replacements come while the long request still runs (its own is due: it was taken
    // more than REPLACE_AFTER ago).
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(e.eval("1 + 1", &EvalOptions::default()).unwrap().value, json!(2));
    let refilled = wait_for_idle(&e, 2);
    assert!(!long.is_finished(), "the set refilled only after the long request: {refilled:?}");
    assert_eq!(refilled.idle, 2, "{refilled:?}");
    assert_eq!(long.join().unwrap().value, json!(1));
}

#[test]
fn the_zygote_refuses_a_spawn_whose_policy_is_invalid() {
    let e = engine();
    let zygote_binary = rsandbox::zygote::locate_zygote(None).unwrap();
    let root = tempdir_for_test();
    let zygote = Arc::new(rsandbox::zygote::Zygote::start(&zygote_binary, &[], &[], false, &root).unwrap());
    let bad = lockdown::Policy { read_only: vec!["relative/path".into()], ..lockdown::Policy::default() };
    let err =
        rsandbox::child::SandboxChild::spawn(&zygote, bad, &root, vec![], &[], None, false).err().expect("refused");
    assert!(matches!(err, EngineError::Setup(_)), "{err:?}");
    assert!(err.to_string().contains("refused a spawn request: invalid policy"), "{err}");
    let bad_env = vec![("A=B".to_string(), "x".to_string())];
    let err =
        rsandbox::child::SandboxChild::spawn(&zygote, lockdown::Policy::default(), &root, bad_env, &[], None, false)
            .err()
            .unwrap();
    assert!(err.to_string().contains("invalid environment variable \"A=B\""), "{err}");
    // The zygote keeps serving after refusals.
    assert!(zygote.is_alive());
    assert_eq!(e.eval("1", &EvalOptions::default()).unwrap().outcome, Outcome::Ok);
    std::fs::remove_dir_all(&root).unwrap();
}

fn tempdir_for_test() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rsandbox-engine-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_child_restores_default_signal_handling() {
    // The zygote runs with Rust's SIGPIPE ignored and SIGCHLD blocked; a child that
    // kept either would not behave like R (and what it forks) expects.
    let r = engine().eval("tools::pskill(Sys.getpid(), 13L); Sys.sleep(2); 1", &EvalOptions::default()).unwrap();
    assert_eq!(r.outcome, Outcome::Crashed, "{r:?}");
    assert_eq!(r.exit.signal, Some(13), "SIGPIPE kills, as by default: {r:?}");
    let blocked = engine()
        .eval("p <- parallel::mcparallel(21 * 2); parallel::mccollect(p, wait = TRUE)[[1]]", &EvalOptions::default())
        .unwrap();
    assert_eq!(blocked.value.as_f64(), Some(42.0), "children are reaped through SIGCHLD: {blocked:?}");
}

// ---------------------------------------------------------------------------------
// Protocol v2 in the engine: streaming, interrupts, files, snapshots.

#[test]
fn output_streams_while_the_code_runs() {
    let s = engine().session(EvalOptions::default(), vec![]).unwrap();
    let start = std::time::Instant::now();
    let mut seen: Vec<(rsandbox::OutputStream, String, Duration)> = Vec::new();
    let mut on_event = |e: rsandbox::Event<'_>| match e {
        rsandbox::Event::Output { stream, text } => seen.push((stream, text.to_string(), start.elapsed())),
    };
    let code = "cat('first\\n'); message('note'); warning('careful'); Sys.sleep(2); cat('second\\n')";
    let r = s.execute_streaming(code, &quick(), Some(&mut on_event)).unwrap();
    assert_eq!(r.outcome, Outcome::Ok, "{r:?}");
    assert_eq!(r.stdout, "first\nsecond\n", "the result still holds everything");
    let first = seen
        .iter()
        .find(|(st, t, _)| *st == rsandbox::OutputStream::Stdout && t.contains("first"))
        .expect("stdout streamed");
    assert!(first.2 < Duration::from_millis(1900), "printed before the sleep, seen at {:?}", first.2);
    let message = seen.iter().find(|(st, _, _)| *st == rsandbox::OutputStream::Message).expect("message streamed");
    assert_eq!(message.1, "note\n");
    assert!(message.2 < Duration::from_millis(1900));
    let warning = seen.iter().find(|(st, _, _)| *st == rsandbox::OutputStream::Warning).expect("warning streamed");
    assert!(warning.1.contains("careful"), "{warning:?}");
    let second = seen.iter().find(|(_, t, _)| t.contains("second")).expect("second line streamed");
    assert!(second.2 >= Duration::from_millis(1900), "printed after the sleep, seen at {:?}", second.2);
}

#[test]
fn an_interrupt_stops_r_code_and_keeps_the_session() {
    let s = Arc::new(engine().session(EvalOptions::default(), vec![]).unwrap());
    s.execute("x <- 42", &quick()).unwrap();
    let other = s.clone();
    let interrupter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        other.interrupt()
    });
    let r = s.execute("repeat {}", &quick()).unwrap();
    assert!(interrupter.join().unwrap());
    assert_eq!(r.outcome, Outcome::Interrupted, "{r:?}");
    assert!(!r.reset, "{r:?}");
    assert_eq!(s.execute("x", &quick()).unwrap().value, json!(42), "state kept");
}

#[test]
fn an_interrupt_of_an_idle_session_signals_nothing_and_the_next_execute_works() {
    let s = engine().session(EvalOptions::default(), vec![]).unwrap();
    s.execute("x <- 1", &quick()).unwrap();
    assert!(!s.interrupt(), "nothing runs: nothing is interrupted");
    // A multi-line function definition: R's parser checks for interrupts while reading
    // it, which is where a pending interrupt used to surface ("unexpected end of input").
    let r = s.execute("f <- function(y) {\n  y + x\n}\nf(41)", &quick()).unwrap();
    assert_eq!(r.outcome, Outcome::Ok, "{r:?}");
    assert_eq!(r.value, json!(42));
}

#[test]
fn a_timeout_in_r_code_keeps_the_session() {
    let s = engine().session(EvalOptions::default(), vec![]).unwrap();
    s.execute("y <- 'kept'", &quick()).unwrap();
    let r = s.execute("Sys.sleep(30)", &ExecuteOptions { timeout: Duration::from_millis(500), ..quick() }).unwrap();
    assert_eq!(r.outcome, Outcome::Timeout, "{r:?}");
    assert!(!r.reset, "R yielded to the interrupt: {r:?}");
    assert_eq!(s.execute("y", &quick()).unwrap().value, json!("kept"));
}

#[test]
fn native_code_that_ignores_the_interrupt_costs_the_session() {
    let s = Arc::new(engine().session(EvalOptions::default(), vec![]).unwrap());
    s.execute("z <- 1; m <- matrix(runif(9e6), 3000)", &quick()).unwrap();
    let other = s.clone();
    let interrupter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        other.interrupt()
    });
    // Reference BLAS: one matrix product, seconds long, never checks for interrupts.
    let r = s
        .execute("for (i in 1:20) m2 <- m %*% m", &ExecuteOptions { timeout: Duration::from_secs(60), ..quick() })
        .unwrap();
    interrupter.join().unwrap();
    assert_eq!(r.outcome, Outcome::Interrupted, "{r:?}");
    assert!(r.reset, "{r:?}");
    assert_eq!(r.reset_reason.as_deref(), Some("interrupt_timeout"));
    assert_eq!(s.execute("exists('z')", &quick()).unwrap().value, json!(false), "a fresh session");
}

#[test]
fn files_go_in_and_out_under_the_rules() {
    let s = engine().session(EvalOptions::default(), vec![]).unwrap();
    assert_eq!(s.put_file("data/in.csv", b"a,b\n1,2\n").unwrap(), 8);
    let r = s
        .execute("d <- read.csv('data/in.csv'); write.csv(d * 10, 'out.csv', row.names = FALSE); d$b", &quick())
        .unwrap();
    assert_eq!(r.value, json!(2), "{r:?}");
    let out = s.get_file("out.csv").unwrap();
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(&out.data_base64).unwrap();
    assert_eq!(String::from_utf8(bytes).unwrap(), "\"a\",\"b\"\n10,20\n");
    let (files, truncated) = s.list_files().unwrap();
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert!(!truncated);
    assert!(paths.contains(&"data/in.csv") && paths.contains(&"out.csv"), "{paths:?}");
    // Hostile paths and files the sandbox made.
    s.execute("file.symlink('/etc/passwd', 'pw'); dir.create('d'); file.symlink('/etc', 'etc')", &quick()).unwrap();
    for bad in ["/etc/passwd", "../x", "a/../../b", "pw", "etc/passwd", "", "a\0b"] {
        let err = s.get_file(bad).err().unwrap_or_else(|| panic!("{bad:?} was served"));
        assert!(matches!(err, EngineError::Input(_)), "{bad:?}: {err:?}");
    }
    assert!(matches!(s.put_file("etc/x", b"x"), Err(EngineError::Input(_))));
    let fifo = s.execute("system2('true')", &quick()); // exec is a violation: the session resets
    assert!(fifo.unwrap().reset);
    let limited = engine().session(EvalOptions { max_output: 1000, ..EvalOptions::default() }, vec![]).unwrap();
    assert!(matches!(limited.put_file("big", &vec![0u8; 2000]), Err(EngineError::Input(_))));
    limited.execute("writeBin(raw(5000), 'big')", &quick()).unwrap();
    let err = limited.get_file("big").unwrap_err().to_string();
    assert!(err.contains("over the limit"), "{err}");
}

#[test]
fn a_snapshot_restores_in_a_new_session_and_a_crafted_one_harms_nothing() {
    let s = engine().session(EvalOptions::default(), vec![]).unwrap();
    s.execute("library(stats4); x <- 1:3; f <- function(a) a + 1; con <- file(tempfile(), 'w')", &quick()).unwrap();
    let (snapshot, not_saved) = s.snapshot().unwrap();
    assert_eq!(not_saved, vec!["con".to_string()]);
    let (restored, warnings) = engine().restore_session(EvalOptions::default(), vec![], &snapshot).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let r = restored.execute("c(f(x), 'package:stats4' %in% search(), exists('con'))", &quick()).unwrap();
    assert_eq!(r.value, json!([2, 3, 4, 1, 0]), "{r:?}");
    // Bytes that are not a snapshot: refused inside the sandbox, nothing else happens.
    use base64::Engine as _;
    let crafted =
        base64::engine::general_purpose::STANDARD.encode(b"X\n\x00\x00\x00\x03garbage that is not a serialization");
    let err = engine().restore_session(EvalOptions::default(), vec![], &crafted).err().expect("refused");
    assert!(matches!(err, EngineError::Input(_)), "{err:?}");
    assert!(engine().restore_session(EvalOptions::default(), vec![], "not base64!").is_err());
    assert_eq!(engine().eval("1", &EvalOptions::default()).unwrap().outcome, Outcome::Ok);
}

#[test]
fn eval_places_files_and_collects_outputs() {
    let mut request = rsandbox::EvalRequest::new(
        "x <- readLines('in/a.txt'); dir.create('out'); writeLines(toupper(x), 'out/b.txt'); writeLines('no', 'c.log')",
        EvalOptions::default(),
    );
    request.files = vec![("in/a.txt".into(), b"hello\n".to_vec())];
    request.collect = vec!["out/*.txt".into()];
    let r = engine().eval_request(request).unwrap();
    assert_eq!(r.outcome, Outcome::Ok, "{r:?}");
    assert_eq!(r.files.len(), 1, "{:?}", r.files);
    assert_eq!(r.files[0].path, "out/b.txt");
    assert_eq!(r.files[0].data_base64, "SEVMTE8K");
}

#[test]
fn tool_arguments_keep_their_declared_order() {
    // Declared (n, s): a positional call binds n first, not in name order.
    let t = tool("describe", &[("n", ArgType::Numeric), ("s", ArgType::Character)], |a| {
        Ok(json!(format!("{}:{}", a["n"], a["s"].as_str().unwrap())))
    });
    let s = engine().session(EvalOptions::default(), vec![t]).unwrap();
    let r = s.execute("describe(3, 'x')", &quick()).unwrap();
    assert_eq!(r.value, json!("3:x"), "{r:?}");
    // As the stdio server reads a request: a line parsed to a Value, then to the spec.
    let line: Value = serde_json::from_str(r#"{"name": "f", "args": {"z": "any", "a": "any"}}"#).unwrap();
    let spec: ToolSpec = serde_json::from_value(line).unwrap();
    assert_eq!(spec.args.keys().collect::<Vec<_>>(), ["z", "a"], "JSON order kept");
}

#[test]
fn help_renders_as_text_and_keeps_the_session() {
    let s = engine().session(EvalOptions::default(), vec![]).unwrap();
    s.execute("kept <- 42", &quick()).unwrap();
    let help = s.execute("?lm", &quick()).unwrap();
    assert_eq!(help.outcome, Outcome::Ok, "{help:?}");
    assert!(help.stdout.contains("Fitting Linear Models"), "{}", help.stdout);
    assert!(!help.stdout.contains('\u{8}'), "overstrikes removed: {:?}", help.stdout);
    let example = s.execute("invisible(example(mean))", &quick()).unwrap();
    assert_eq!(example.outcome, Outcome::Ok, "{example:?}");
    assert!(example.stdout.contains("mean> xm <- mean(x)"), "{}", example.stdout);
    let browse = s.execute("browseURL('https://example.org')", &quick()).unwrap();
    assert_eq!(browse.messages, vec!["no web browser in the sandbox: https://example.org was not opened\n"]);
    let vignette = s.execute("vignette('datatable-intro', package = 'data.table')", &quick()).unwrap();
    assert_eq!(vignette.outcome, Outcome::Ok, "{vignette:?}");
    assert!(vignette.messages[0].starts_with("vignette 'datatable-intro': no viewer in the sandbox"), "{vignette:?}");
    for listing in ["demo()", "vignette()", "help.search('lm')"] {
        let r = s.execute(listing, &quick()).unwrap();
        assert_eq!(r.outcome, Outcome::Ok, "{listing}: {r:?}");
        assert!(!r.stdout.is_empty(), "{listing} lists something");
    }
    let after = s.execute("kept", &quick()).unwrap();
    assert!(!after.reset, "{after:?}");
    assert_eq!(after.value, json!(42), "no help-related call ended the session");
}

#[test]
fn r_finds_its_own_share_doc_and_include_trees() {
    let r = engine()
        .eval(
            "c(length(readLines(file.path(R.home('doc'), 'COPYING'))) > 100,
               file.exists(file.path(R.home('share'), 'Rd', 'macros', 'system.Rd')),
               file.exists(file.path(R.home('include'), 'R.h')),
               grepl('R Core Team', format(citation(), style = 'text')))",
            &EvalOptions::default(),
        )
        .unwrap();
    assert_eq!(r.outcome, Outcome::Ok, "{r:?}");
    assert_eq!(r.value, json!([true, true, true, true]), "{r:?}");
}

#[test]
fn a_sessions_output_limit_bounds_every_execute() {
    let limited = EvalOptions { max_output: 10_000, ..EvalOptions::default() };
    let s = engine().session(limited, vec![]).unwrap();
    s.execute("kept <- 1", &quick()).unwrap();
    let r = s.execute("cat(strrep('x', 1e6))", &quick()).unwrap();
    assert_eq!(r.outcome, Outcome::OutputLimit, "{:?}", r.outcome);
    assert!(r.stdout.len() <= 10_000, "{} bytes kept", r.stdout.len());
}

#[test]
fn the_workspace_bounds_inodes_with_its_disk_quota() {
    // Empty files cost no quota bytes but an inode each (kernel memory): a 16 MiB
    // workspace holds at most 16 MiB / 4 KiB of them.
    let options = EvalOptions { disk: Some(16 << 20), ..EvalOptions::default() };
    let r = engine()
        .eval("n <- 0; while (n < 1e5 && suppressWarnings(file.create(sprintf('f%d', n)))) n <- n + 1; n", &options)
        .unwrap();
    assert_eq!(r.outcome, Outcome::Ok, "{r:?}");
    let made = r.value.as_f64().unwrap();
    assert!((3000.0..=4096.0).contains(&made), "{made} empty files in a 16 MiB workspace");
}

#[test]
fn a_snapshot_runs_no_binding_and_leaves_nothing_running() {
    let s = engine().session(EvalOptions::default(), vec![]).unwrap();
    // An active binding is code: a snapshot does not read it (it is not saved).
    s.execute("makeActiveBinding('a', function() { file.create('ran'); 1 }, environment()); b <- 2", &quick()).unwrap();
    // A promise is forced (as save() forces it); what its code leaves running is ended
    // with the request, as after an evaluation.
    s.execute("delayedAssign('p', { parallel::mcparallel({ Sys.sleep(1); file.create('late') }); 3 })", &quick())
        .unwrap();
    let (_, not_saved) = s.snapshot().unwrap();
    assert_eq!(not_saved, vec!["a".to_string()]);
    let r = s.execute("Sys.sleep(2.5); c(file.exists('ran'), file.exists('late'), b)", &quick()).unwrap();
    assert_eq!(r.value, json!([0, 0, 2]), "neither ran nor late: {r:?}");
}

/// Native code that keeps running after the R code returns: a thread in R's own process
/// and a chain of processes that fork and exit as fast as they can (SIGCHLD ignored, so
/// nobody waits for them). Each counts its steps in memory R can read.
const LINGERING_C: &str = r#"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>
static atomic_long thread_steps;
static atomic_long *chain_steps;
static void *spin(void *arg) { (void)arg; for (;;) { thread_steps++; usleep(1000); } return 0; }
void rsb_start(int *ok) {
    pthread_t t;
    chain_steps = mmap(0, sizeof *chain_steps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    signal(SIGCHLD, SIG_IGN);
    *ok = pthread_create(&t, 0, spin, 0) == 0 && chain_steps != MAP_FAILED;
    if (*ok && fork() == 0) {
        for (;;) { (*chain_steps)++; if (fork() != 0) _exit(0); }
    }
}
void rsb_steps(double *thread, double *chain) { *thread = thread_steps; *chain = *chain_steps; }
"#;

#[test]
fn between_requests_nothing_of_the_sandbox_runs() {
    let dir = tempdir_for_test();
    let source = dir.join("lingering.c");
    std::fs::write(&source, LINGERING_C).unwrap();
    let library = dir.join("lingering.so");
    let cc = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&library)
        .arg(&source)
        .arg("-lpthread")
        .status()
        .unwrap();
    assert!(cc.success(), "cc failed");
    let s = engine().session(EvalOptions::default(), vec![]).unwrap();
    s.put_file("lingering.so", &std::fs::read(&library).unwrap()).unwrap();
    let steps = "unlist(.C('rsb_steps', thread = 0, chain = 0)[c('thread', 'chain')])";
    let started = s
        .execute(
            &format!("dyn.load(file.path(getwd(), 'lingering.so')); stopifnot(.C('rsb_start', 0L)[[1]] == 1L); Sys.sleep(0.5); {steps}"),
            &quick(),
        )
        .unwrap();
    assert_eq!(started.outcome, Outcome::Ok, "{started:?}");
    std::thread::sleep(Duration::from_millis(1500));
    let later = s.execute(steps, &quick()).unwrap();
    assert_eq!(later.outcome, Outcome::Ok, "{later:?}");
    let (before, after) = (&started.value, &later.value);
    let delta = |key: &str| after[key].as_f64().unwrap() - before[key].as_f64().unwrap();
    // They ran during the request (slowly on a busy machine: a fork is costly there).
    assert!(before["thread"].as_f64().unwrap() > 20.0, "the thread ran during the request: {before}");
    assert!(before["chain"].as_f64().unwrap() > 3.0, "the chain ran during the request: {before}");
    // 1.5 s between the requests: ~1500 steps of the thread had it run then.
    assert!(delta("thread") < 300.0, "the thread ran between requests: {before} then {after}");
    // A chain that made k steps in the 0.5 s of the request makes ~3k in the 1.5 s
    // between them. What it may make is the tail of its request: from R reading the
    // counter to the supervisor stopping the group, a millisecond or two on an idle
    // machine, but 25 ms once in a CI run with both cores busy (14 steps at 277 per
    // 0.5 s). So the bound is a time at the chain's own rate, 100 ms (a fifth of k),
    // against the 1 500 ms it would make running between the requests.
    let steps_in_request = before["chain"].as_f64().unwrap();
    assert!(delta("chain") < steps_in_request / 5.0, "the chain outlived its request: {before} then {after}");
}

#[test]
fn streamed_messages_count_against_the_output_limit() {
    let limited = EvalOptions { max_output: 100_000, ..EvalOptions::default() };
    let s = engine().session(limited, vec![]).unwrap();
    let mut streamed = 0usize;
    let mut on_event = |e: rsandbox::Event<'_>| match e {
        rsandbox::Event::Output { text, .. } => streamed += text.len(),
    };
    // 10 MB of messages: each one is small, and each is streamed as it is signalled.
    let code = "for (i in 1:10000) message(strrep('m', 1000))";
    let r = s.execute_streaming(code, &quick(), Some(&mut on_event)).unwrap();
    assert_eq!(r.outcome, Outcome::OutputLimit, "{:?}", r.outcome);
    assert!(streamed <= 100_000, "{streamed} bytes streamed past a 100 kB limit");
}

#[test]
fn the_empty_symbol_is_a_value_like_any_other() {
    let r = engine().eval("quote(expr = )", &EvalOptions::default()).unwrap();
    assert_eq!(r.outcome, Outcome::Ok, "{r:?}");
    assert_eq!(r.stdout, "\n", "R prints it as an empty line");
    assert_eq!(r.value, json!({"class": ["name"], "printed": ""}));
}

#[test]
fn warnings_and_the_default_device_are_rs_own() {
    let s = engine().session(EvalOptions::default(), vec![]).unwrap();
    assert_eq!(s.execute("length(warnings())", &quick()).unwrap().value, json!(0));
    // warnings() holds the last top-level call's warnings, as in Rscript.
    let r = s.execute("f <- function() { warning('a'); warning('b') }; f(); names(warnings())", &quick()).unwrap();
    assert_eq!(r.value, json!(["a", "b"]), "{r:?}");
    // The default device is 7 x 7 inches, as R's own: coplot's margins fit.
    let plot = s.execute("coplot(lat ~ long | depth, data = quakes); round(dev.size('in'), 6)", &quick()).unwrap();
    assert_eq!(plot.outcome, Outcome::Ok, "{plot:?}");
    assert_eq!(plot.value, json!([7, 7]));
}

/// The namespace `kind` (`net`, `ipc`, `uts`) of process `pid`, as the kernel names it.
fn namespace_of(pid: u32, kind: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).unwrap().to_string_lossy().into_owned()
}

/// As root, the zygote's children share one network, one IPC and one UTS namespace, the
/// zygote's, none of them the host's (`lockdown::namespaces::share_empty_namespaces`).
#[test]
fn root_children_share_one_set_of_empty_namespaces_not_the_hosts() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: only root's children share namespaces");
        return;
    }
    // An engine of its own: its zygote's only children are these two sessions.
    let engine = Engine::start(EngineConfig { prefork: 0, ..EngineConfig::default() }).expect("engine starts");
    let sessions: Vec<_> = (0..2).map(|_| engine.session(EvalOptions::default(), vec![]).unwrap()).collect();
    for s in &sessions {
        assert_eq!(s.execute("1+1", &quick()).unwrap().outcome, Outcome::Ok);
    }
    let zygote = engine.info().pid;
    let children: Vec<u32> = std::fs::read_to_string(format!("/proc/{zygote}/task/{zygote}/children"))
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(children.len(), 2, "{children:?}");
    for kind in ["net", "ipc", "uts"] {
        let host = namespace_of(std::process::id(), kind);
        let (a, b) = (namespace_of(children[0], kind), namespace_of(children[1], kind));
        assert_ne!(a, host, "a sandbox in the host's {kind} namespace");
        assert_eq!(a, b, "each child made a {kind} namespace of its own");
        assert_eq!(a, namespace_of(zygote, kind), "the shared {kind} namespace is the zygote's");
    }
    // And nothing in it reaches out: the sandbox cannot even make a socket.
    let probe = sessions[0]
        .execute("con <- try(socketConnection('127.0.0.1', 9), silent = TRUE); inherits(con, 'try-error')", &quick())
        .unwrap();
    assert_eq!(probe.outcome, Outcome::Ok, "{probe:?}");
    assert_eq!(probe.value, json!(true), "{probe:?}");
}

/// The capability sets of a process, from `/proc/PID/status` (`CapInh` .. `CapAmb`).
fn capability_sets(pid: u32) -> Vec<(String, u64)> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.strip_prefix("Cap"))
        .filter_map(|rest| rest.split_once(':'))
        .map(|(set, hex)| (set.to_string(), u64::from_str_radix(hex.trim(), 16).unwrap()))
        .collect()
}

/// Every sandbox ends with no capability at all, its bounding set included, whether it
/// emptied the bounding set itself or inherited it empty from the zygote (as root, the
/// zygote empties its own once and keeps its effective capabilities).
#[test]
fn a_sandbox_holds_no_capability_and_an_empty_bounding_set() {
    let e = engine();
    let s = e.session(EvalOptions::default(), vec![]).unwrap();
    assert_eq!(s.execute("1+1", &quick()).unwrap().value, json!(2));
    let zygote = e.info().pid;
    let children = std::fs::read_to_string(format!("/proc/{zygote}/task/{zygote}/children")).unwrap();
    let children: Vec<u32> = children.split_whitespace().map(|p| p.parse().unwrap()).collect();
    assert!(!children.is_empty(), "the session's sandbox is a child of the zygote");
    // Other tests fork on the same zygote: a child seen mid-lockdown still holds the
    // zygote's capabilities for a few milliseconds. A sandbox is one that has gone a
    // while holding them: look again until each child holds none or is gone.
    for child in children {
        let give_up = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let sets = capability_sets(child);
            if sets.is_empty() {
                break; // reaped meanwhile (another test's sandbox)
            }
            assert_eq!(sets.len(), 5, "{sets:?}");
            if sets.iter().all(|(_, bits)| *bits == 0) {
                break;
            }
            assert!(std::time::Instant::now() < give_up, "sandbox {child}: {sets:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        let zygote_sets = capability_sets(zygote);
        assert!(zygote_sets.contains(&("Bnd".to_string(), 0)), "the zygote's bounding set: {zygote_sets:?}");
    }
}

/// The child reads its plot directory only when something may have drawn: a device of
/// `options(device)` opened by the request, or a forked worker (its devices are its own).
/// Each request of a session gets its own plots, a worker's plot included.
#[test]
fn plots_come_back_from_the_request_that_drew_them_workers_included() {
    let s = engine().session(EvalOptions::default(), Vec::new()).unwrap();
    let drawn = s.execute("plot(1:10)", &quick()).unwrap();
    assert_eq!((drawn.outcome, drawn.plots.len()), (Outcome::Ok, 1), "{:?}", drawn.stderr);
    let none = s.execute("1 + 1", &quick()).unwrap();
    assert_eq!((none.outcome, none.plots.len()), (Outcome::Ok, 0));
    let worker = "parallel::mccollect(parallel::mcparallel({ plot(1:3); grDevices::dev.off(); 1 }))[[1]]";
    let by_worker = s.execute(worker, &quick()).unwrap();
    assert_eq!((by_worker.outcome, by_worker.value.clone()), (Outcome::Ok, json!(1)), "{:?}", by_worker.stderr);
    assert_eq!(by_worker.plots.len(), 1, "the worker's plot");
    assert!(by_worker.plots[0].data_base64.starts_with("iVBORw0KGgo"), "a PNG");
}

/// `q()` reports, then R exits, and the zygote may reap it before the supervisor has seen
/// the exit: the sandbox's group is then gone when the supervisor stops it after the
/// report. That is the quit it reported (an error with its status), never a crash.
#[test]
fn a_quit_is_an_error_however_soon_r_is_reaped() {
    // An engine of its own: 40 children forked in a row on the shared one would be seen,
    // mid-lockdown, by the tests that look at every child of its zygote.
    let e = Engine::start(EngineConfig { prefork: 0, ..EngineConfig::default() }).expect("engine starts");
    for _ in 0..40 {
        let r = e.eval("q(status = 3)", &EvalOptions::default()).unwrap();
        assert_eq!(r.outcome, Outcome::Error, "{r:?}");
        assert_eq!(r.error.map(|e| e.message).as_deref(), Some("quit(status = 3)"));
    }
}
