//! Values over HTTP (issue #25): `globals` on `POST /v1/eval` and on a session's
//! execute, and a function's arguments sent as the R package sends `args` (one global
//! list, `.rsandbox_args`, and `do.call`); a data frame with a factor and a Date must
//! arrive in R with its classes and come back in the typed encoding, changed as the code
//! changed it. Needs `cargo build --workspace` first (the zygote binary).

mod common;

use common::http_server::HttpServer;
use serde_json::{json, Value};

/// Grades with a factor, the days they were handed in (a Date, one missing) and scores.
fn frame() -> Value {
    json!({"type": "data.frame", "names": ["grade", "handed_in", "score"], "nrow": 3,
        "columns": [{"type": "factor", "levels": ["fail", "pass"], "codes": [2, 1, null]},
                    {"type": "Date", "value": ["2024-02-28", null, "2024-12-31"]},
                    {"type": "double", "value": [1.5, 2.0, 3.25]}]})
}

/// What the R code below returns for [`frame`]: the classes R saw, then the frame with
/// every date a day later, the scores times `k`, and a new factor level.
const CHANGE: &str = "c(class(d$grade), class(d$handed_in), levels(d$grade))";

fn changed(k: f64) -> Value {
    json!({"type": "data.frame", "names": ["grade", "handed_in", "score"], "nrow": 3,
        "columns": [{"type": "factor", "levels": ["fail", "pass", "late"], "codes": [2, 1, 3]},
                    {"type": "Date", "value": ["2024-02-29", null, "2025-01-01"]},
                    {"type": "double", "value": ([1.5, 2.0, 3.25].map(|x| number(x * k)))}]})
}

/// A double as R writes it: whole numbers without a fraction (JSON `3`, not `3.0`).
fn number(x: f64) -> Value {
    if x.fract() == 0.0 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// R code turning `d` into [`changed`]`(k)`.
fn change_code(k: &str) -> String {
    format!(
        "levels(d$grade) <- c(levels(d$grade), 'late'); d$grade[is.na(d$grade)] <- 'late'; \
         d$handed_in <- d$handed_in + 1; d$score <- d$score * {k}; d"
    )
}

/// The result of an evaluation that went well (HTTP answers with the result itself).
fn result_of(status: u16, answer: &Value) -> &Value {
    assert_eq!((status, &answer["outcome"]), (200, &json!("ok")), "{answer}");
    answer
}

#[test]
fn globals_and_args_survive_post_eval_and_a_session_execute_both_ways() {
    let server = HttpServer::start(&[], &[]);

    // POST /v1/eval: R sees the classes...
    let (status, answer) = server.post("/v1/eval", &json!({"code": CHANGE, "globals": {"d": frame()}}));
    assert_eq!(result_of(status, &answer)["value"], json!(["factor", "Date", "fail", "pass"]));
    // ...and the changed frame comes back typed.
    let (status, answer) =
        server.post("/v1/eval", &json!({"code": change_code("2"), "globals": {"d": frame()}, "typed": true}));
    assert_eq!(result_of(status, &answer)["value_typed"], changed(2.0));

    // A function's arguments, as the R package sends `args = list(d, 10L)`.
    let args = json!({"type": "list", "value": [frame(), {"type": "integer", "value": [10]}]});
    let code =
        format!(".rsandbox_fn <- function(d, k) {{ {} }}\ndo.call(\".rsandbox_fn\", .rsandbox_args)", change_code("k"));
    let (status, answer) =
        server.post("/v1/eval", &json!({"code": code, "globals": {".rsandbox_args": args}, "typed": true}));
    assert_eq!(result_of(status, &answer)["value_typed"], changed(10.0));

    // A session: globals go in with one execute and stay defined for the next.
    let (status, created) = server.post("/v1/sessions", &json!({}));
    assert!((200..300).contains(&status), "{created}");
    let session = created["session"].as_str().expect("a session id").to_string();
    let execute = format!("/v1/sessions/{session}/execute");
    let (status, answer) = server.post(&execute, &json!({"code": CHANGE, "globals": {"d": frame()}}));
    assert_eq!(result_of(status, &answer)["value"], json!(["factor", "Date", "fail", "pass"]));
    let (status, answer) = server.post(&execute, &json!({"code": change_code("3"), "typed": true}));
    assert_eq!(result_of(status, &answer)["value_typed"], changed(3.0));
    // A global replaces the session's variable of that name.
    let (status, answer) = server.post(
        &execute,
        &json!({"code": "nrow(d)", "globals": {"d": {"type": "data.frame", "names": [],
            "columns": [], "nrow": 5}}}),
    );
    assert_eq!(result_of(status, &answer)["value"], json!(5));
    // A value that is not data is refused in the client's terms, before anything runs.
    let (status, answer) = server.post(&execute, &json!({"code": "1", "globals": {"e": {"type": "environment"}}}));
    assert_eq!(status, 400, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("unknown type \"environment\""), "{answer}");
}
