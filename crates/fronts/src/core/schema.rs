//! The JSON Schemas generated from the code's types, for the checked-in documents:
//! `docs/protocol.schema.json`, whole (schemars: every `$defs` entry comes from a Rust
//! type, `$defs/request` from [`crate::stdio::Request`] and `$defs/output` from
//! [`crate::stdio::Output`]), and `docs/openapi.json` (utoipa, the document
//! `GET /openapi.json` serves). The test `crates/fronts/tests/schemas.rs` fails when a
//! document differs from what the code generates;
//! `RSANDBOX_WRITE_SCHEMAS=1 cargo test -p rsandbox-fronts --test schemas` rewrites them.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{json, Map, Value};

/// Schemas of requests as they are deserialized (a field with a default may be left
/// out) and of output as it is serialized (a field the server always writes is
/// required), each by its own generator; a type both sides use must come out the same
/// from both.
struct Generators {
    reading: SchemaGenerator,
    writing: SchemaGenerator,
}

impl Generators {
    /// Definitions referenced as `#<path>/Name`.
    fn new(path: &'static str) -> Generators {
        let settings = SchemaSettings::draft2020_12().with(|s| s.definitions_path = path.into());
        Generators {
            reading: settings.clone().for_deserialize().into_generator(),
            writing: settings.for_serialize().into_generator(),
        }
    }

    /// `T` as a client sends it; the name of its definition.
    fn read<T: JsonSchema>(&mut self) -> String {
        defined::<T>(&mut self.reading)
    }

    /// `T` as the server writes it; the name of its definition.
    fn write<T: JsonSchema>(&mut self) -> String {
        defined::<T>(&mut self.writing)
    }

    /// Every definition, by type name.
    fn definitions(mut self) -> Map<String, Value> {
        let mut defs = Map::from_iter(self.reading.take_definitions(true));
        for (name, def) in self.writing.take_definitions(true) {
            if let Some(other) = defs.get(&name) {
                assert!(other == &def, "type {name} is read and written with different schemas");
            }
            defs.insert(name, def);
        }
        defs
    }
}

/// `docs/protocol.schema.json` as the code generates it. The `$defs` names are the Rust
/// type names in `snake_case` (`EvalResult` is `eval_result`).
pub fn protocol_schema() -> Value {
    let mut generators = Generators::new("/$defs");
    let request = generators.read::<crate::stdio::Request>();
    let output = generators.write::<crate::stdio::Output<'_>>();
    assert_eq!((request.as_str(), output.as_str()), ("Request", "Output"), "the roots are $defs of their own");
    let mut defs: Map<String, Value> =
        generators.definitions().into_iter().map(|(name, def)| (snake_case(&name), def)).collect();
    defs.sort_keys();
    let mut schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://rsandbox.invalid/protocol.schema.json",
        "title": "rsandbox stdio protocol",
        "description": "Generated from the code's types (crates/fronts/src/core/schema.rs). One JSON object per \
                        line: `$defs/request` is what a client writes on stdin, `$defs/output` what rsandbox \
                        writes on stdout.",
        "$defs": defs,
    });
    rename_refs(&mut schema);
    schema
}

/// Generate `T`'s schema into `generator`'s definitions; the name of its definition.
fn defined<T: JsonSchema>(generator: &mut SchemaGenerator) -> String {
    let reference = generator.subschema_for::<T>();
    let target = reference.get("$ref").and_then(Value::as_str).unwrap_or_default();
    let name = target.rsplit('/').next().unwrap_or_default().to_string();
    assert!(!name.is_empty(), "{} has a definition of its own", T::schema_name());
    name
}

/// `EvalResult` as `eval_result`, `RValue` as `r_value`.
fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            let after_lower = chars[i - 1].is_ascii_lowercase() || chars[i - 1].is_ascii_digit();
            let starts_word =
                chars[i - 1].is_ascii_uppercase() && chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
            if after_lower || starts_word {
                out.push('_');
            }
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Every `$ref` to `#/$defs/Name` as `#/$defs/name`.
fn rename_refs(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match (key.as_str(), v.as_str().and_then(|r| r.strip_prefix("#/$defs/"))) {
                    ("$ref", Some(name)) => *v = Value::String(format!("#/$defs/{}", snake_case(name))),
                    _ => rename_refs(v),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rename_refs),
        _ => {}
    }
}

/// The HTTP API's OpenAPI document, as `GET /openapi.json` serves it: utoipa's, from
/// the routes and their types, with the components of the types the stdio protocol
/// shares (the result and everything in it, typed values, limits, tool specs) taken
/// from their `JsonSchema` derives, as in `docs/protocol.schema.json` (OpenAPI 3.1's
/// schemas are JSON Schema 2020-12). utoipa names those types
/// (`rsandbox::result`'s `openapi_components!`) and refers to them; their schemas are
/// only ever these.
#[cfg(feature = "http")]
pub fn openapi() -> Value {
    use utoipa::OpenApi as _;
    let mut document = serde_json::to_value(crate::http::ApiDoc::openapi()).expect("the OpenAPI document serializes");
    let mut generators = Generators::new("/components/schemas");
    generators.read::<rsandbox::Limits>();
    generators.read::<rsandbox::ToolSpec>();
    generators.read::<rsandbox::values::RValue>();
    generators.write::<rsandbox::EvalResult>();
    generators.write::<rsandbox::WorkspaceFile>();
    let components = document["components"]["schemas"].as_object_mut().expect("the document has components");
    components.extend(generators.definitions());
    components.sort_keys();
    document_rate_limit(&mut document);
    document
}

/// Every route behind the token check (those that document its 401) also answers 429:
/// the check counts the token's requests per minute before the route runs.
#[cfg(feature = "http")]
fn document_rate_limit(document: &mut Value) {
    let operations = document["paths"].as_object_mut().into_iter().flat_map(|paths| paths.values_mut());
    for responses in operations.filter_map(Value::as_object_mut).flat_map(|path| path.values_mut()) {
        let Some(responses) = responses.get_mut("responses").and_then(Value::as_object_mut) else { continue };
        if let Some(unauthorized) = responses.get("401").cloned() {
            responses.entry("429").or_insert(unauthorized);
        }
    }
}

/// [`openapi`], pretty-printed (`docs/openapi.json`).
#[cfg(feature = "http")]
pub fn openapi_json() -> String {
    let mut text = serde_json::to_string_pretty(&openapi()).expect("the OpenAPI document serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::snake_case;

    #[test]
    fn type_names_become_snake_case() {
        for (name, snake) in
            [("EvalResult", "eval_result"), ("RValue", "r_value"), ("Limits", "limits"), ("ErrorCode", "error_code")]
        {
            assert_eq!(snake_case(name), snake);
        }
    }
}
