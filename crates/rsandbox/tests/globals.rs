//! Values as data, both ways (issue #25): `globals` bound before the code runs and the
//! typed value of a result (`typed`), against a real zygote and real R. Needs
//! `cargo build --workspace` first (the zygote binary).

use rsandbox::session::ExecuteOptions;
use rsandbox::{Engine, EngineConfig, EngineError, EvalOptions, EvalRequest, InputError, Outcome};
use serde_json::{json, Map, Value};
use std::sync::OnceLock;

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        Engine::start(EngineConfig::default()).expect("engine starts (did you run cargo build --workspace?)")
    })
}

fn globals(v: Value) -> Map<String, Value> {
    v.as_object().expect("an object").clone()
}

fn eval_with(code: &str, g: Value) -> Result<rsandbox::EvalResult, EngineError> {
    let mut request = EvalRequest::new(code, EvalOptions::default());
    request.globals = globals(g);
    request.typed = true;
    engine().eval_request(request)
}

/// A data frame with a factor, a Date, an integer column (NA in each) and character row
/// names, as a grading script would pass a student's data.
fn student_frame() -> Value {
    json!({"type": "data.frame", "names": ["group", "day", "score"], "nrow": 3,
        "row_names": ["ann", "bob", "cy"],
        "columns": [
            {"type": "factor", "levels": ["control", "treated"], "codes": [2, 1, null]},
            {"type": "Date", "value": ["2024-01-02", null, "2024-02-29"]},
            {"type": "integer", "value": [90, null, 75]}]})
}

#[test]
fn a_data_frame_goes_in_and_comes_back_with_its_types() {
    let r = eval_with(
        "stopifnot(is.factor(d$group), inherits(d$day, 'Date'), is.integer(d$score),
                   identical(levels(d$group), c('control', 'treated')),
                   identical(d$day[3], as.Date('2024-02-29')), identical(rownames(d), c('ann', 'bob', 'cy')),
                   is.na(d$score[2]), is.na(d$group[3]))
         d",
        json!({"d": student_frame()}),
    )
    .unwrap();
    assert_eq!(r.outcome, Outcome::Ok, "{:?}", r.error);
    assert_eq!(r.value_typed.as_ref(), Some(&student_frame()));
    // The lossy value is still there, unchanged.
    assert_eq!(r.value[0]["group"], json!("treated"));
}

#[test]
fn vectors_keep_names_na_and_integer_versus_double() {
    let g = json!({
        "i": {"type": "integer", "value": [1, null, 3], "names": ["a", "b", "c"]},
        "x": {"type": "double", "value": [1, null, "NaN", "Inf", "-Inf", 0.1]},
        "l": {"type": "logical", "value": [true, null]},
        "s": {"type": "character", "value": ["é", null, "a\"b\n"]},
        "m": {"type": "double", "value": [1, 2, 3, 4, 5, 6], "dim": [2, 3], "dimnames": [["r1", "r2"], null]},
        "t": {"type": "POSIXct", "value": [1704153600.5], "tz": "UTC"},
        "o": {"type": "factor", "levels": ["lo", "hi"], "codes": [1, 2], "ordered": true},
        "nested": {"type": "list", "value": [{"type": "null"}, {"type": "list", "value": [], "names": []}],
                   "names": ["a", ""]}
    });
    let r = eval_with(
        "stopifnot(identical(i, c(a = 1L, b = NA, c = 3L)), identical(x, c(1, NA, NaN, Inf, -Inf, 0.1)),
                   identical(l, c(TRUE, NA)), identical(s, c('\\u00e9', NA, 'a\"b\\n')),
                   identical(m, matrix(c(1, 2, 3, 4, 5, 6), 2, dimnames = list(c('r1', 'r2'), NULL))),
                   identical(t, as.POSIXct(1704153600.5, tz = 'UTC', origin = '1970-01-01')),
                   identical(o, factor(c('lo', 'hi'), levels = c('lo', 'hi'), ordered = TRUE)),
                   identical(nested, list(a = NULL, structure(list(), names = character()))))
         list(i = i, x = x, l = l, s = s, m = m, t = t, o = o, nested = nested)",
        g.clone(),
    )
    .unwrap();
    assert_eq!(r.outcome, Outcome::Ok, "{:?}", r.error);
    let back = r.value_typed.expect("typed value");
    assert_eq!(back["type"], "list");
    let names = back["names"].as_array().unwrap();
    for (name, value) in names.iter().zip(back["value"].as_array().unwrap()) {
        assert_eq!(value, &g[name.as_str().unwrap()], "{name}");
    }
}

#[test]
fn what_cannot_travel_is_said_and_the_default_result_is_unchanged() {
    let r = eval_with("lm(dist ~ speed, cars)", json!({})).unwrap();
    assert_eq!(r.value_typed, Some(json!({"type": "unsupported", "class": ["lm"]})));
    let plain = engine().eval("1:2", &EvalOptions::default()).unwrap();
    assert_eq!(plain.value, json!([1, 2]));
    assert_eq!(plain.value_typed, None);
    assert!(!serde_json::to_string(&plain).unwrap().contains("value_typed"));
    let invisible = eval_with("x <- 1", json!({})).unwrap();
    assert_eq!(invisible.value_typed, None);
    let null = eval_with("NULL", json!({})).unwrap();
    assert_eq!(null.value_typed, Some(json!({"type": "null"})));
}

#[test]
fn bad_globals_are_bad_input_before_anything_runs() {
    for bad in [
        json!({"x": {"type": "environment"}}),
        json!({"x": {"type": "closure", "body": "system('id')"}}),
        json!({"x": {"type": "character", "value": [1]}}),
        json!({"x": "1 + 1"}),
    ] {
        let e = eval_with("x", bad.clone()).unwrap_err();
        assert!(matches!(e, EngineError::Input(InputError::BadGlobals(_))), "{bad}: {e}");
    }
}

#[test]
fn a_session_keeps_the_globals_it_was_given() {
    let s = engine().session(EvalOptions::default(), Vec::new()).unwrap();
    let with = ExecuteOptions {
        globals: globals(json!({"d": student_frame(), "k": {"type": "integer", "value": [2]}})),
        typed: true,
        ..ExecuteOptions::default()
    };
    let r = s.execute("d$score * k", &with).unwrap();
    assert_eq!(r.outcome, Outcome::Ok, "{:?}", r.error);
    assert_eq!(r.value_typed, Some(json!({"type": "integer", "value": [180, null, 150]})));
    // Still there in the next execute, which binds none.
    let r = s.execute("class(d$day)", &ExecuteOptions::default()).unwrap();
    assert_eq!(r.value, json!("Date"));
    assert_eq!(r.value_typed, None);
}
