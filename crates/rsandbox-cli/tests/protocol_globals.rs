//! The stdio protocol's `globals` and `typed` (issue #25): values go in and come back as
//! data on `eval` and `session.execute`; every line checked against
//! docs/protocol.schema.json.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

fn schema(root: &str) -> jsonschema::Validator {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/protocol.schema.json");
    let mut schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    schema["$ref"] = json!(format!("#/$defs/{root}"));
    jsonschema::validator_for(&schema).expect("the schema compiles")
}

#[test]
fn globals_in_and_typed_values_out_on_eval_and_execute() {
    let (requests, outputs) = (schema("request"), schema("output"));
    let frame = json!({"type": "data.frame", "names": ["g", "d", "n"], "nrow": 2,
        "columns": [{"type": "factor", "levels": ["a", "b"], "codes": [2, null]},
                    {"type": "Date", "value": ["2024-01-02", null]},
                    {"type": "integer", "value": [1, 2]}]});
    let lines = [
        json!({"op": "eval", "id": 1, "code": "d[order(d$n), ]", "globals": {"d": frame}, "typed": true}),
        json!({"op": "eval", "id": 2, "code": "x", "globals": {"x": {"type": "environment"}}}),
        json!({"op": "session.create", "id": 3}),
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_rsandbox"))
        .args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("rsandbox serve starts");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // Requests run concurrently: responses are kept until asked for.
    let mut early: Vec<Value> = Vec::new();
    let mut recv = |id: i64| loop {
        if let Some(i) = early.iter().position(|v| v["id"] == json!(id)) {
            return early.remove(i);
        }
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        let errors: Vec<String> = outputs.iter_errors(&value).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "output does not match the schema: {errors:?}\n{value}");
        early.push(value);
    };
    let send = |stdin: &mut std::process::ChildStdin, request: &Value| {
        assert!(requests.is_valid(request), "request does not match the schema: {request}");
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
    };
    for line in &lines {
        if line["id"] == 2 {
            // Not a value: the schema says so too; sent anyway, the server must refuse it.
            assert!(!requests.is_valid(line));
            writeln!(stdin, "{line}").unwrap();
        } else {
            send(&mut stdin, line);
        }
    }
    let ok = recv(1);
    assert_eq!(ok["result"]["outcome"], "ok", "{ok}");
    // Subsetting rows gives R's integer row names, which travel too.
    let mut ordered = frame.clone();
    ordered["row_names"] = json!([1, 2]);
    assert_eq!(ok["result"]["value_typed"], ordered);
    let bad = recv(2);
    assert_eq!(bad["error"]["code"], "bad_input", "{bad}");
    assert!(bad["error"]["message"].as_str().unwrap().contains("unknown type \"environment\""), "{bad}");
    let session = recv(3)["session"].as_str().unwrap().to_string();

    send(
        &mut stdin,
        &json!({"op": "session.execute", "id": 4, "session": session, "code": "y <- x * 2L; y",
                "globals": {"x": {"type": "integer", "value": [1, null], "names": ["a", "b"]}}, "typed": true}),
    );
    let r = recv(4);
    assert_eq!(r["result"]["value_typed"], json!({"type": "integer", "value": [2, null], "names": ["a", "b"]}), "{r}");
    send(&mut stdin, &json!({"op": "session.execute", "id": 5, "session": session, "code": "y"}));
    let r = recv(5);
    assert_eq!(r["result"]["value"], json!({"a": 2, "b": null}), "{r}");
    assert!(r["result"].get("value_typed").is_none(), "{r}");
    drop(stdin);
    child.wait().unwrap();
}
