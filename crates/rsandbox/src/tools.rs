//! Host tools: R functions in the sandbox whose bodies run here, outside it.
//!
//! The host side is the boundary: every call is checked against the tool set (name),
//! the tool's declared arguments (names and types), the message size and the
//! per-execute call cap before its handler runs. The R stub in the child only
//! collects arguments.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// Default cap on one tool-call message (arguments as JSON).
pub const DEFAULT_MAX_TOOL_MESSAGE: usize = 1 << 20;

/// The largest R integer (`.Machine$integer.max`).
const R_INT_MAX: f64 = i32::MAX as f64;

/// The type an argument must have, as the R stub encodes it (`rsandbox_to_json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ArgType {
    /// A number or an array of numbers (NA as null).
    Numeric,
    /// Whole numbers R's integers hold (scalar or array): within ±2147483647 (R's
    /// integers are 32-bit, -2^31 being `NA`).
    Integer,
    /// A string or an array of strings.
    Character,
    /// A boolean or an array of booleans.
    Logical,
    /// A named list (object) or unnamed list (array).
    List,
    /// A data frame: an array of records.
    DataFrame,
    /// Anything.
    Any,
}

impl ArgType {
    /// Whether `v` has this type.
    pub fn accepts(self, v: &Value) -> bool {
        let each = |ok: &dyn Fn(&Value) -> bool| match v {
            Value::Array(items) => items.iter().all(|i| i.is_null() || ok(i)),
            other => ok(other),
        };
        match self {
            ArgType::Numeric => each(&|x| x.is_number()),
            ArgType::Integer => each(&|x| x.as_f64().is_some_and(|f| f.fract() == 0.0 && f.abs() <= R_INT_MAX)),
            ArgType::Character => each(&|x| x.is_string()),
            ArgType::Logical => each(&|x| x.is_boolean()),
            ArgType::List => v.is_object() || v.is_array(),
            ArgType::DataFrame => v.as_array().is_some_and(|rows| rows.iter().all(Value::is_object)),
            ArgType::Any => true,
        }
    }
}

impl fmt::Display for ArgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = serde_json::to_value(self).map_err(|_| fmt::Error)?;
        f.write_str(v.as_str().unwrap_or("?"))
    }
}

/// A tool's public description (what the stdio protocol's `session.create` carries).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// R identifier the tool is callable as (not a reserved word such as `if`).
    #[schemars(regex(pattern = R_IDENTIFIER_PATTERN))]
    pub name: String,
    /// Human description.
    #[serde(default)]
    pub description: String,
    /// Arguments, by name (all required), in the order the R function takes them: a
    /// positional call `add(1, 2)` binds as declared.
    #[serde(default)]
    #[schemars(with = "std::collections::BTreeMap<String, ArgType>", extend("propertyNames" = {"pattern": R_IDENTIFIER_PATTERN}))]
    pub args: ToolArgs,
}

/// The characters of an R identifier ([`is_r_identifier`] also refuses reserved words
/// and a dot before a digit), for the schema.
const R_IDENTIFIER_PATTERN: &str = r"^[A-Za-z.][A-Za-z0-9._]*$";

/// A tool's arguments in declaration order.
pub type ToolArgs = indexmap::IndexMap<String, ArgType>;

/// Runs a call on the host: receives the checked arguments (a JSON object).
pub type Handler = Arc<dyn Fn(&serde_json::Map<String, Value>) -> Result<Value, String> + Send + Sync>;

/// A tool: its spec and its handler.
#[derive(Clone)]
pub struct Tool {
    /// The spec.
    pub spec: ToolSpec,
    /// The handler.
    pub handler: Handler,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool").field("spec", &self.spec).finish_non_exhaustive()
    }
}

impl Tool {
    /// A tool from its spec and a handler; the spec is checked.
    pub fn new(
        spec: ToolSpec,
        handler: impl Fn(&serde_json::Map<String, Value>) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Result<Tool, String> {
        if !is_r_identifier(&spec.name) {
            return Err(format!("tool name {:?} is not an R identifier", spec.name));
        }
        if let Some(bad) = spec.args.keys().find(|a| !is_r_identifier(a)) {
            return Err(format!("argument name {bad:?} of tool {} is not an R identifier", spec.name));
        }
        Ok(Tool { spec, handler: Arc::new(handler) })
    }
}

/// Longest name a tool call may carry; anything longer is refused before it is looked up.
pub const MAX_TOOL_NAME: usize = 256;
/// Characters of a sandbox-chosen string that an error message quotes.
const QUOTED_CHARS: usize = 40;

/// `s` quoted for an error message, cut to a few characters: text the sandbox chose is
/// never echoed whole (a name of a megabyte would come back as several, escaped).
pub fn quote_excerpt(s: &str) -> String {
    let mut chars = s.chars();
    let head: String = chars.by_ref().take(QUOTED_CHARS).collect();
    if chars.next().is_none() {
        format!("{head:?}")
    } else {
        format!("{head:?}… ({} bytes)", s.len())
    }
}

/// Check one call: known tool, exactly its arguments, each of the declared type. The
/// cheap checks (name length, then the name itself) come before anything reads the
/// arguments; errors quote only excerpts of what the sandbox sent.
pub fn check_call<'t>(tools: &'t [Tool], name: &str, args: &Value) -> Result<&'t Tool, String> {
    if name.len() > MAX_TOOL_NAME {
        return Err(format!("tool name of {} bytes exceeds the limit of {MAX_TOOL_NAME}", name.len()));
    }
    let tool =
        tools.iter().find(|t| t.spec.name == name).ok_or_else(|| format!("unknown tool {}", quote_excerpt(name)))?;
    let empty = serde_json::Map::new();
    let given = match args {
        Value::Object(m) => m,
        Value::Array(a) if a.is_empty() => &empty,
        _ => return Err(format!("Tool '{name}': arguments must be named")),
    };
    // securer's shape ("Tool 'add': argument 'a' must be numeric, got character"), so
    // its users' handlers and tests keep matching.
    if let Some(unknown) = given.keys().find(|k| !tool.spec.args.contains_key(*k)) {
        return Err(format!("Tool '{name}': unknown argument {}", quote_excerpt(unknown)));
    }
    for (arg, ty) in &tool.spec.args {
        match given.get(arg) {
            None => return Err(format!("Tool '{name}': missing argument '{arg}'")),
            Some(v) if !ty.accepts(v) => {
                let within = if *ty == ArgType::Integer { " (whole numbers within ±2147483647)" } else { "" };
                return Err(format!("Tool '{name}': argument '{arg}' must be {ty}{within}, got {}", r_kind(v)));
            }
            Some(_) => {}
        }
    }
    Ok(tool)
}

/// The R class a JSON value came from, as the sandbox's R would name it (for errors).
fn r_kind(v: &Value) -> &'static str {
    let scalar = |v: &Value| match v {
        Value::Bool(_) => Some("logical"),
        Value::Number(_) => Some("numeric"),
        Value::String(_) => Some("character"),
        _ => None,
    };
    match v {
        Value::Null => "NULL",
        Value::Object(_) => "list",
        Value::Array(items) => {
            // A vector with NAs arrives with nulls in it.
            let mut kinds = items.iter().filter(|i| !i.is_null()).map(scalar);
            match kinds.next() {
                None => "logical",
                Some(Some(first)) if kinds.all(|k| k == Some(first)) => first,
                _ => "list",
            }
        }
        scalar_value => scalar(scalar_value).unwrap_or("list"),
    }
}

pub use wire::names::is_r_identifier;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn add() -> Tool {
        let spec: ToolSpec =
            serde_json::from_value(json!({"name": "add", "args": {"a": "numeric", "b": "numeric"}})).unwrap();
        Tool::new(spec, |a| Ok(json!(a["a"].as_f64().unwrap() + a["b"].as_f64().unwrap()))).unwrap()
    }

    #[test]
    fn calls_are_checked_by_name_arguments_and_type() {
        let tools = [add()];
        assert!(check_call(&tools, "add", &json!({"a": 1, "b": [2, null]})).is_ok());
        assert_eq!(check_call(&tools, "sub", &json!({})).unwrap_err(), "unknown tool \"sub\"");
        assert_eq!(check_call(&tools, "add", &json!({"a": 1})).unwrap_err(), "Tool 'add': missing argument 'b'");
        assert_eq!(
            check_call(&tools, "add", &json!({"a": 1, "b": 2, "c": 3})).unwrap_err(),
            "Tool 'add': unknown argument \"c\""
        );
        assert_eq!(
            check_call(&tools, "add", &json!({"a": "x", "b": 2})).unwrap_err(),
            "Tool 'add': argument 'a' must be numeric, got character"
        );
        let got = |v: Value| check_call(&tools, "add", &json!({"a": v, "b": 2})).unwrap_err();
        assert!(got(json!([true, null])).ends_with("got logical"));
        assert!(got(json!({"x": 1})).ends_with("got list"));
        assert!(got(json!([1, "x"])).ends_with("got list"));
        assert!(got(Value::Null).ends_with("got NULL"));
    }

    #[test]
    fn errors_never_echo_more_than_an_excerpt() {
        let tools = [add()];
        let quotes = "\"".repeat(MAX_TOOL_NAME);
        let error = check_call(&tools, &quotes, &json!({})).unwrap_err();
        assert!(error.len() < 200, "{} bytes", error.len());
        assert!(error.ends_with("(256 bytes)"), "{error}");
        let long = "x".repeat(MAX_TOOL_NAME + 1);
        assert_eq!(
            check_call(&tools, &long, &json!({})).unwrap_err(),
            format!("tool name of {} bytes exceeds the limit of 256", MAX_TOOL_NAME + 1)
        );
        let mut args = serde_json::Map::new();
        args.insert("\u{1}".repeat(10_000), json!(1));
        let error = check_call(&tools, "add", &Value::Object(args)).unwrap_err();
        assert!(error.len() < 400, "{error}");
        assert_eq!(check_call(&tools, "add", &json!([1, 2])).unwrap_err(), "Tool 'add': arguments must be named");
    }

    #[test]
    fn every_type_accepts_what_r_sends_and_nothing_else() {
        assert!(ArgType::Integer.accepts(&json!([1, 2, null])) && !ArgType::Integer.accepts(&json!(1.5)));
        // R's integers are 32-bit: 1e308 is a whole number but no integer.
        assert!(ArgType::Integer.accepts(&json!([2147483647, -2147483647])));
        for too_big in [json!(1e308), json!(2147483648_i64), json!([1, -2147483648_i64]), json!(9007199254740993_u64)] {
            assert!(!ArgType::Integer.accepts(&too_big), "{too_big}");
        }
        assert!(ArgType::Character.accepts(&json!("x")) && !ArgType::Character.accepts(&json!(1)));
        assert!(ArgType::Logical.accepts(&json!([true, null])) && !ArgType::Logical.accepts(&json!("TRUE")));
        assert!(ArgType::List.accepts(&json!({"k": 1})) && !ArgType::List.accepts(&json!(1)));
        assert!(ArgType::DataFrame.accepts(&json!([{"x": 1}])) && !ArgType::DataFrame.accepts(&json!([1])));
        assert!(ArgType::Any.accepts(&json!(null)));
    }

    #[test]
    fn names_must_be_r_identifiers() {
        for ok in ["add", "get.data", "x_1", ".hidden"] {
            assert!(is_r_identifier(ok), "{ok}");
        }
        for bad in ["", "1x", ".1x", "a-b", "if", "TRUE", "a b", "x\"); system(\"id"] {
            assert!(!is_r_identifier(bad), "{bad}");
        }
        let spec = ToolSpec { name: "if".into(), description: String::new(), args: ToolArgs::new() };
        assert!(Tool::new(spec, |_| Ok(Value::Null)).is_err());
    }
}
