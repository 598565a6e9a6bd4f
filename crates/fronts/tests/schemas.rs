//! The checked-in schemas are what the code generates: `docs/protocol.schema.json` and
//! `docs/openapi.json`, whole. With `RSANDBOX_WRITE_SCHEMAS=1` the test
//! writes them instead (then commit the change).

use std::path::PathBuf;

fn docs(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs").join(name)
}

fn writing() -> bool {
    std::env::var_os("RSANDBOX_WRITE_SCHEMAS").is_some()
}

/// The generated document, as it is checked in (pretty, one newline at the end).
fn protocol_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&fronts::core::schema::protocol_schema()).unwrap();
    text.push('\n');
    text
}

#[test]
fn the_protocol_schema_is_the_generated_one() {
    let path = docs("protocol.schema.json");
    let generated = protocol_schema_text();
    if writing() {
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/protocol.schema.json is not what the code generates: run RSANDBOX_WRITE_SCHEMAS=1 cargo test -p \
         rsandbox-fronts --test schemas"
    );
}

#[test]
fn the_openapi_document_is_the_generated_one() {
    let path = docs("openapi.json");
    let generated = fronts::core::schema::openapi_json();
    if writing() {
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/openapi.json is not what the code generates: run RSANDBOX_WRITE_SCHEMAS=1 cargo test -p \
         rsandbox-fronts --test schemas"
    );
}

/// The generated limits carry the engine's own bound on open files (the hand-written
/// schema once said 1 while the engine refused below 16).
#[test]
fn the_generated_limits_know_nofile_minimum() {
    let defs = &fronts::core::schema::protocol_schema()["$defs"];
    assert_eq!(defs["limits"]["properties"]["nofile"]["minimum"], 16, "{}", defs["limits"]);
    assert_eq!(defs["limits"]["additionalProperties"], false);
}

/// A validator for `$defs/<root>` of the generated protocol schema.
fn generated_validator(root: &str) -> jsonschema::Validator {
    let mut schema = fronts::core::schema::protocol_schema();
    schema["$ref"] = serde_json::json!(format!("#/$defs/{root}"));
    jsonschema::validator_for(&schema).expect("the generated schema compiles")
}

/// `$defs/r_value` (from `rsandbox::values::RValue`) and the engine's own check of
/// `globals` (`rsandbox::values::validate_globals`) agree: every value the check takes
/// the schema takes, and every value the schema refuses the check refuses. (The check
/// refuses more: lengths that disagree, repeated levels, codes past the levels.)
#[test]
fn the_value_schema_and_the_engines_check_agree() {
    use serde_json::json;
    let values = generated_validator("r_value");
    let check = |v: &serde_json::Value| {
        let globals = serde_json::Map::from_iter([("x".to_string(), v.clone())]);
        rsandbox::values::validate_globals(&globals).is_ok()
    };
    let good = [
        json!({"type": "null"}),
        json!({"type": "double", "value": [1, null, "NaN", "-Inf", 2.5], "names": ["a", "b", null, "d", "e"]}),
        json!({"type": "integer", "value": [1, 2, 3, 4, 5, 6], "dim": [2, 3], "dimnames": [["r1", "r2"], null]}),
        json!({"type": "integer", "value": [2147483647, -2147483647, null]}),
        json!({"type": "logical", "value": [true, null]}),
        json!({"type": "character", "value": ["é", null]}),
        json!({"type": "factor", "levels": ["a", "b"], "codes": [2, null], "ordered": true}),
        json!({"type": "Date", "value": ["2024-01-02", null]}),
        json!({"type": "POSIXct", "value": [0.5, null, "Inf"], "tz": "UTC"}),
        json!({"type": "POSIXct", "value": [0], "tz": null}),
        json!({"type": "list", "value": [{"type": "null"}, {"type": "character", "value": ["x"]}], "names": ["a", "b"]}),
        json!({"type": "data.frame", "names": ["f", "i"], "nrow": 2, "row_names": ["r1", "r2"], "columns": [
            {"type": "factor", "levels": ["a", "b"], "codes": [2, null]},
            {"type": "integer", "value": [1, null]}]}),
        json!({"type": "data.frame", "names": [], "nrow": 0, "columns": [], "row_names": []}),
    ];
    for value in &good {
        assert!(check(value), "the engine refuses {value}");
        let errors: Vec<String> = values.iter_errors(value).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "the schema refuses {value}: {errors:?}");
    }
    let bad = [
        json!(1),
        json!({"value": [1]}),
        json!({"type": "environment"}),
        json!({"type": "closure", "value": "function() 1"}),
        json!({"type": "double", "value": [1], "code": "stop()"}),
        json!({"type": "null", "names": []}),
        json!({"type": "integer", "value": [1.5]}),
        json!({"type": "integer", "value": [3000000000u64]}),
        json!({"type": "integer", "value": [-2147483648i64]}),
        json!({"type": "logical", "value": ["TRUE"]}),
        json!({"type": "double", "value": ["NA"]}),
        json!({"type": "double", "value": [1], "names": null}),
        json!({"type": "double", "value": [1], "dim": []}),
        json!({"type": "double", "value": [1], "dim": [-1]}),
        json!({"type": "factor", "levels": ["a"], "codes": [0]}),
        json!({"type": "factor", "levels": ["a"], "codes": [1], "ordered": null}),
        json!({"type": "Date", "value": ["2024-1-2"]}),
        json!({"type": "POSIXct", "value": ["now"]}),
        json!({"type": "POSIXct", "value": [1], "tz": 0}),
        json!({"type": "list", "value": [1]}),
        json!({"type": "data.frame", "names": ["a"], "nrow": -1, "columns": [{"type": "double", "value": []}]}),
        json!({"type": "data.frame", "names": [], "nrow": 0, "columns": [], "row_names": [1.5]}),
    ];
    for value in &bad {
        assert!(!values.is_valid(value), "the schema takes {value}");
        assert!(!check(value), "the engine takes {value}");
    }
}
