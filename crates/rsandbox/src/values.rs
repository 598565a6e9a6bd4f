//! R values as data: the typed JSON encoding of `globals` (values bound in the sandbox
//! before the code runs) and of a result's `value_typed`. The format is specified in
//! `docs/protocol.md` ("Values"); the sandbox decodes and encodes it in `eval.R`, the R
//! package on the host in `r/rsandbox/R/values.R`. Nothing of it is ever code: no
//! `parse`, no `eval`, no `unserialize` on either side.
//!
//! The supervisor checks every value here before a sandbox is taken, so a wrong one is
//! bad input (nothing ran), not an error inside the sandbox.

use crate::errors::InputError;
use serde_json::{Map, Value};

/// Largest `globals`, as JSON (the stdio protocol's line limit).
pub const MAX_GLOBALS_BYTES: usize = 16 << 20;
/// Deepest nesting of lists and data frames in one value.
pub const MAX_DEPTH: usize = 64;
/// Most globals in one request.
pub const MAX_GLOBALS: usize = 10_000;
/// Longest name (R's limit for a symbol).
const MAX_NAME_BYTES: usize = 10_000;

/// Check `globals` (name -> typed value) before anything runs.
pub fn validate_globals(globals: &Map<String, Value>) -> Result<(), InputError> {
    if globals.is_empty() {
        return Ok(());
    }
    if globals.len() > MAX_GLOBALS {
        return Err(bad(format!("{} globals; at most {MAX_GLOBALS}", globals.len())));
    }
    let bytes = serde_json::to_vec(globals).map(|v| v.len()).unwrap_or(usize::MAX);
    if bytes > MAX_GLOBALS_BYTES {
        return Err(bad(format!("globals are {bytes} bytes as JSON; the limit is {MAX_GLOBALS_BYTES}")));
    }
    for (name, value) in globals {
        if name.is_empty() || name.len() > MAX_NAME_BYTES || name.contains('\0') {
            return Err(bad(format!("{name:?} is not a name R can bind (empty, too long or with a NUL)")));
        }
        check(value, 0).map_err(|e| bad(format!("global `{name}`: {e}")))?;
    }
    Ok(())
}

fn bad(message: String) -> InputError {
    InputError::BadGlobals(message)
}

/// The rows of the R value a checked node decodes to: its length (for a matrix or a
/// data frame, its rows).
fn check(node: &Value, depth: usize) -> Result<usize, String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    let Some(fields) = node.as_object() else {
        return Err(format!("a value must be an object with a \"type\", not {}", kind(node)));
    };
    let Some(ty) = fields.get("type").and_then(Value::as_str) else {
        return Err("a value must have a \"type\" (a string)".into());
    };
    let allowed: &[&str] = match ty {
        "null" => &[],
        "logical" | "integer" | "double" | "character" => &["value", "names", "dim", "dimnames"],
        "factor" => &["levels", "codes", "ordered", "names"],
        "Date" => &["value", "names"],
        "POSIXct" => &["value", "tz", "names"],
        "list" => &["value", "names"],
        "data.frame" => &["names", "columns", "nrow", "row_names"],
        other => {
            return Err(format!(
                "unknown type {other:?} (known: null, logical, integer, double, character, factor, Date, \
                 POSIXct, list, data.frame)"
            ))
        }
    };
    if let Some(extra) = fields.keys().find(|k| *k != "type" && !allowed.contains(&k.as_str())) {
        return Err(format!("unknown field {extra:?} in a {ty} value"));
    }
    let mut rows = None;
    let n = match ty {
        "null" => 0,
        "factor" => {
            let levels = strings(fields, "levels", false)?;
            let mut seen = std::collections::HashSet::new();
            if let Some(dup) = levels.iter().find(|l| !seen.insert(*l)) {
                return Err(format!("factor level {dup:?} is repeated"));
            }
            let codes = array(fields, "codes")?;
            for code in codes {
                let ok = code.is_null() || code.as_u64().is_some_and(|c| c >= 1 && c as usize <= levels.len());
                if !ok {
                    return Err(format!("factor code {code} is not null or 1..{}", levels.len()));
                }
            }
            if fields.get("ordered").is_some_and(|o| !o.is_boolean()) {
                return Err("\"ordered\" must be true or false".into());
            }
            codes.len()
        }
        "Date" => {
            let values = array(fields, "value")?;
            for v in values {
                if !(v.is_null() || v.as_str().is_some_and(is_date)) {
                    return Err(format!("a Date must be \"YYYY-MM-DD\" or null, not {v}"));
                }
            }
            values.len()
        }
        "POSIXct" => {
            let values = array(fields, "value")?;
            let is_double = |v: &Value| v.is_number() || matches!(v.as_str(), Some("NaN" | "Inf" | "-Inf"));
            if let Some(v) = values.iter().find(|v| !(v.is_null() || is_double(v))) {
                return Err(format!("a POSIXct is seconds since 1970-01-01 UTC (a number) or null, not {v}"));
            }
            if fields.get("tz").is_some_and(|t| !(t.is_null() || t.is_string())) {
                return Err("\"tz\" must be a time zone name (a string) or null".into());
            }
            values.len()
        }
        "list" => {
            let values = array(fields, "value")?;
            for v in values {
                check(v, depth + 1)?;
            }
            values.len()
        }
        "data.frame" => {
            let names = strings(fields, "names", false)?;
            let columns = array(fields, "columns")?;
            if names.len() != columns.len() {
                return Err(format!("a data frame has {} names for {} columns", names.len(), columns.len()));
            }
            let nrow =
                fields.get("nrow").and_then(Value::as_u64).ok_or("a data frame needs \"nrow\" (a whole number)")?
                    as usize;
            for (name, column) in names.iter().zip(columns) {
                let len = check(column, depth + 1)?;
                if len != nrow {
                    return Err(format!("column {name:?} has {len} values for {nrow} rows"));
                }
            }
            if let Some(row_names) = fields.get("row_names") {
                let rows = row_names.as_array().ok_or("\"row_names\" must be an array")?;
                let all_strings = rows.iter().all(Value::is_string);
                let all_ints = rows.iter().all(|r| r.as_i64().is_some_and(|i| i.unsigned_abs() <= i32::MAX as u64));
                if rows.len() != nrow || !(all_strings || all_ints) {
                    return Err(format!("\"row_names\" must be {nrow} strings or {nrow} integers"));
                }
            }
            return Ok(nrow);
        }
        atomic => {
            let values = array(fields, "value")?;
            for v in values {
                let ok = v.is_null()
                    || match atomic {
                        "logical" => v.is_boolean(),
                        "integer" => v.as_i64().is_some_and(|i| i.unsigned_abs() <= i32::MAX as u64),
                        "double" => v.is_number() || matches!(v.as_str(), Some("NaN" | "Inf" | "-Inf")),
                        _ => v.is_string(),
                    };
                if !ok {
                    return Err(format!("{v} is not a {atomic} element (or null for NA)"));
                }
            }
            if let Some(dim) = fields.get("dim") {
                let dim = dim.as_array().filter(|d| !d.is_empty()).ok_or("\"dim\" must be a non-empty array")?;
                let mut product: u64 = 1;
                for d in dim {
                    let d = d.as_u64().filter(|d| *d <= i32::MAX as u64).ok_or("\"dim\" holds whole numbers")?;
                    product = product.saturating_mul(d);
                }
                if product != values.len() as u64 {
                    return Err(format!("\"dim\" makes {product} elements; \"value\" has {}", values.len()));
                }
                rows = dim[0].as_u64().map(|d| d as usize);
                if let Some(dimnames) = fields.get("dimnames") {
                    let dimnames = dimnames.as_array().filter(|d| d.len() == dim.len());
                    let dimnames = dimnames.ok_or("\"dimnames\" must be an array with one entry per dimension")?;
                    for (names, extent) in dimnames.iter().zip(dim) {
                        let ok = names.is_null()
                            || names.as_array().is_some_and(|a| {
                                a.len() as u64 == extent.as_u64().unwrap_or(0)
                                    && a.iter().all(|s| s.is_string() || s.is_null())
                            });
                        if !ok {
                            return Err("each entry of \"dimnames\" is null or one name per index".into());
                        }
                    }
                }
            } else if fields.contains_key("dimnames") {
                return Err("\"dimnames\" without \"dim\"".into());
            }
            values.len()
        }
    };
    if fields.contains_key("names") && ty != "data.frame" {
        let names = strings(fields, "names", true)?;
        if names.len() != n {
            return Err(format!("{} names for {n} elements", names.len()));
        }
    }
    Ok(rows.unwrap_or(n))
}

// The typed encoding as a type, for its JSON Schema (`docs/protocol.schema.json`'s
// `$defs/r_value`, generated): the rules `validate_globals` checks, field by field (the
// test `crates/fronts/tests/schemas.rs` holds the two together on the same good and bad
// values). What a schema cannot say (lengths that agree, distinct levels, codes within
// the levels) only the check says. Never decoded into: a value is checked and passed on
// as JSON.
/// An R value as data (`docs/protocol.md`, "Values"); nothing of it is ever code.
#[derive(schemars::JsonSchema)]
#[serde(tag = "type", deny_unknown_fields)]
#[allow(dead_code)]
pub enum RValue {
    /// `NULL`.
    #[serde(rename = "null")]
    Null,
    /// A logical vector (with `dim`, a matrix or array).
    #[serde(rename = "logical")]
    Logical {
        /// The elements; `null` is `NA`.
        value: Vec<Option<bool>>,
        /// Names, or extents and their names.
        #[serde(flatten)]
        attributes: VectorAttributes,
    },
    /// An integer vector (with `dim`, a matrix or array).
    #[serde(rename = "integer")]
    Integer {
        /// The elements: whole numbers within ±2147483647 (R's integers; -2^31 is its
        /// `NA`), `null` for `NA`.
        #[schemars(inner(range(min = -2147483647, max = 2147483647)))]
        value: Vec<Option<i64>>,
        /// Names, or extents and their names.
        #[serde(flatten)]
        attributes: VectorAttributes,
    },
    /// A double vector (with `dim`, a matrix or array).
    #[serde(rename = "double")]
    Double {
        /// The elements.
        value: Vec<RDouble>,
        /// Names, or extents and their names.
        #[serde(flatten)]
        attributes: VectorAttributes,
    },
    /// A character vector (with `dim`, a matrix or array).
    #[serde(rename = "character")]
    Character {
        /// The elements; `null` is `NA`.
        value: Vec<Option<String>>,
        /// Names, or extents and their names.
        #[serde(flatten)]
        attributes: VectorAttributes,
    },
    /// `factor()`, or `ordered()` when `ordered`.
    #[serde(rename = "factor")]
    Factor {
        /// The levels, distinct.
        #[schemars(extend("uniqueItems" = true))]
        levels: Vec<String>,
        /// 1-based indices into `levels`; `null` is `NA`.
        #[schemars(inner(range(min = 1)))]
        codes: Vec<Option<u32>>,
        /// An ordered factor.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        ordered: bool,
        /// Element names (`null`: `NA`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        names: Vec<Option<String>>,
    },
    /// A `Date` vector.
    #[serde(rename = "Date")]
    Date {
        /// `"YYYY-MM-DD"`, or `null` for `NA`.
        #[schemars(inner(regex(pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")))]
        value: Vec<Option<String>>,
        /// Element names (`null`: `NA`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        names: Vec<Option<String>>,
    },
    /// A `POSIXct` vector.
    #[serde(rename = "POSIXct")]
    PosixCt {
        /// Seconds since 1970-01-01 UTC (fractions kept).
        value: Vec<RDouble>,
        /// The `tzone` attribute (`""`: local time; absent: none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tz: Option<String>,
        /// Element names (`null`: `NA`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        names: Vec<Option<String>>,
    },
    /// A list.
    #[serde(rename = "list")]
    List {
        /// The elements, values themselves.
        value: Vec<RValue>,
        /// Element names (`null`: `NA`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        names: Vec<Option<String>>,
    },
    /// A `data.frame`.
    #[serde(rename = "data.frame")]
    DataFrame {
        /// Column names, one per column.
        names: Vec<String>,
        /// The columns, each `nrow` long (vectors, factors, dates, matrices, data
        /// frames, lists).
        columns: Vec<RValue>,
        /// Rows.
        nrow: u64,
        /// Row names (absent: automatic).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(with = "RowNames")]
        row_names: Option<RowNames>,
    },
}

/// What an atomic vector carries besides its elements (each optional).
#[derive(schemars::JsonSchema)]
#[allow(dead_code)]
pub struct VectorAttributes {
    /// Element names (`null`: `NA`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    names: Vec<Option<String>>,
    /// Extents, their product the length.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1), inner(range(max = 2147483647)))]
    dim: Vec<u32>,
    /// One `null` or one name per index, per dimension.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    dimnames: Vec<Option<Vec<Option<String>>>>,
}

/// A double element: a number, `null` (`NA`), or one of the values JSON has no number
/// for.
#[allow(dead_code)]
pub struct RDouble;

impl schemars::JsonSchema for RDouble {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RDouble".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A double element: a number, null (NA), or \"NaN\", \"Inf\", \"-Inf\".",
            "anyOf": [{"type": ["number", "null"]}, {"enum": ["NaN", "Inf", "-Inf"]}]
        })
    }
}

/// A data frame's row names: strings, or R's integer row names.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum RowNames {
    /// Names.
    Strings(Vec<String>),
    /// Integers (within ±2147483647).
    Integers(#[schemars(inner(range(min = -2147483647, max = 2147483647)))] Vec<i64>),
}

/// A result's `value_typed`: a value, or the classes of one the encoding cannot carry
/// (a tibble, a model fit, a function, an environment, complex and raw vectors).
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum TypedResultValue {
    /// The value as data.
    Value(RValue),
    /// Not encodable: only its class travels.
    Unsupported(Unsupported),
}

/// A value the typed encoding cannot carry.
#[derive(schemars::JsonSchema)]
#[serde(tag = "type", deny_unknown_fields)]
#[allow(dead_code)]
pub enum Unsupported {
    /// Its `class()`.
    #[serde(rename = "unsupported")]
    Unsupported {
        /// `class(x)`.
        class: Vec<String>,
    },
}

/// `globals` as a type, for its schema: names to values.
pub type Globals = std::collections::BTreeMap<String, RValue>;

fn array<'v>(fields: &'v Map<String, Value>, key: &str) -> Result<&'v Vec<Value>, String> {
    fields.get(key).and_then(Value::as_array).ok_or_else(|| format!("\"{key}\" must be an array"))
}

/// The strings of array `key` (null allowed, as NA, when `na`).
fn strings<'v>(fields: &'v Map<String, Value>, key: &str, na: bool) -> Result<Vec<&'v str>, String> {
    let mut out = Vec::new();
    for v in array(fields, key)? {
        match v {
            Value::String(s) => out.push(s.as_str()),
            Value::Null if na => out.push(""),
            _ => return Err(format!("\"{key}\" must hold strings{}", if na { " or null" } else { "" })),
        }
    }
    Ok(out)
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10 && b.iter().enumerate().all(|(i, c)| if i == 4 || i == 7 { *c == b'-' } else { c.is_ascii_digit() })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn globals(v: Value) -> Result<(), InputError> {
        validate_globals(v.as_object().unwrap())
    }

    #[test]
    fn good_values_pass() {
        globals(json!({
            "x": {"type": "double", "value": [1, null, "NaN", "-Inf"], "names": ["a", "b", null, "d"]},
            "m": {"type": "integer", "value": [1, 2, 3, 4, 5, 6], "dim": [2, 3], "dimnames": [["r1", "r2"], null]},
            "df": {"type": "data.frame", "names": ["f", "d", "i"], "nrow": 2, "columns": [
                {"type": "factor", "levels": ["a", "b"], "codes": [2, null]},
                {"type": "Date", "value": ["2024-01-02", null]},
                {"type": "integer", "value": [1, null]}]},
            "t": {"type": "POSIXct", "value": [0.5], "tz": "UTC"},
            "l": {"type": "list", "value": [{"type": "null"}, {"type": "character", "value": ["é"]}]}
        }))
        .unwrap();
    }

    #[test]
    fn bad_values_are_refused() {
        for bad in [
            json!({"x": 1}),
            json!({"x": {"type": "environment"}}),
            json!({"x": {"type": "closure", "value": "function() 1"}}),
            json!({"x": {"type": "double", "value": [1], "code": "stop()"}}),
            json!({"x": {"type": "integer", "value": [1.5]}}),
            json!({"x": {"type": "integer", "value": [3000000000u64]}}),
            json!({"x": {"type": "logical", "value": ["TRUE"]}}),
            json!({"x": {"type": "factor", "levels": ["a", "a"], "codes": [1]}}),
            json!({"x": {"type": "factor", "levels": ["a"], "codes": [2]}}),
            json!({"x": {"type": "Date", "value": ["2024-1-2"]}}),
            json!({"x": {"type": "double", "value": [1, 2], "dim": [3]}}),
            json!({"x": {"type": "double", "value": [1, 2], "names": ["a"]}}),
            json!({"x": {"type": "data.frame", "names": ["a"], "nrow": 2, "columns": [{"type": "double", "value": [1]}]}}),
            json!({"": {"type": "null"}}),
        ] {
            assert!(matches!(globals(bad.clone()), Err(InputError::BadGlobals(_))), "{bad}");
        }
        let mut deep = json!({"type": "null"});
        for _ in 0..=MAX_DEPTH + 1 {
            deep = json!({"type": "list", "value": [deep]});
        }
        assert!(globals(json!({"x": deep})).is_err());
    }
}
