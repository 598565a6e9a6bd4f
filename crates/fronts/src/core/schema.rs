//! The JSON Schemas generated from the core's types, for the checked-in documents:
//! `docs/protocol.schema.json`'s `$defs/limits` and `$defs/error_code` (schemars) and
//! `docs/openapi.json` (utoipa, the document `GET /openapi.json` serves). The test
//! `crates/fronts/tests/schemas.rs` fails when a document differs from what the code
//! generates; `RSANDBOX_WRITE_SCHEMAS=1 cargo test -p rsandbox-fronts --test schemas`
//! rewrites them.

use serde_json::{Map, Value};

/// The `$defs` of `docs/protocol.schema.json` that come from Rust types, by name.
pub fn protocol_defs() -> Map<String, Value> {
    let mut defs = Map::new();
    defs.insert("limits".into(), def(schemars::schema_for!(rsandbox::Limits)));
    defs.insert("error_code".into(), def(schemars::schema_for!(super::ErrorCode)));
    defs
}

/// A root schema as a `$defs` entry (no `$schema` of its own).
fn def(schema: schemars::Schema) -> Value {
    let mut value = schema.to_value();
    if let Some(object) = value.as_object_mut() {
        object.remove("$schema");
    }
    value
}

/// The HTTP API's OpenAPI document, as `GET /openapi.json` serves it, pretty-printed.
#[cfg(feature = "http")]
pub fn openapi_json() -> String {
    use utoipa::OpenApi as _;
    let mut text = crate::http::ApiDoc::openapi().to_pretty_json().expect("the OpenAPI document serializes");
    text.push('\n');
    text
}
