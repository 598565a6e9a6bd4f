//! The checked-in schemas are what the code generates: `docs/protocol.schema.json`'s
//! generated `$defs` and `docs/openapi.json`. With `RSANDBOX_WRITE_SCHEMAS=1` the test
//! writes them instead (then commit the change).

use std::path::PathBuf;

fn docs(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs").join(name)
}

fn writing() -> bool {
    std::env::var_os("RSANDBOX_WRITE_SCHEMAS").is_some()
}

#[test]
fn the_protocol_schema_has_the_generated_defs() {
    let path = docs("protocol.schema.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    let generated = fronts::core::schema::protocol_defs();
    if writing() {
        for (name, def) in generated {
            schema["$defs"][name] = def;
        }
        let mut out = serde_json::to_string_pretty(&schema).unwrap();
        out.push('\n');
        std::fs::write(&path, out).unwrap();
        return;
    }
    for (name, def) in &generated {
        assert_eq!(
            &schema["$defs"][name], def,
            "docs/protocol.schema.json's $defs/{name} is not what the code generates: run \
             RSANDBOX_WRITE_SCHEMAS=1 cargo test -p rsandbox-fronts --test schemas"
        );
    }
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
    let defs = fronts::core::schema::protocol_defs();
    assert_eq!(defs["limits"]["properties"]["nofile"]["minimum"], 16, "{}", defs["limits"]);
    assert_eq!(defs["limits"]["additionalProperties"], false);
}
