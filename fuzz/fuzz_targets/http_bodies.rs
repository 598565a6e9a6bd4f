//! The HTTP API's request bodies, as its handlers take them before any engine is
//! involved: the JSON (axum's `Json` is serde_json), then the code, limits, caps, files
//! and tool specs. The bytes are tried as each body type.
#![no_main]

use fronts::http::{EvalBody, ExecuteBody, HttpCaps, SessionBody, ToolReply};
use fronts::request::{decode_files, options_from};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let caps = HttpCaps::default();
    if let Ok(body) = serde_json::from_slice::<EvalBody>(data) {
        let _ = rsandbox::options::validate_code(&body.code);
        if let Ok(options) = options_from(&body.limits, body.timeout) {
            let _ = caps.bound(options, &body.limits, body.timeout.is_some());
        }
        let _ = decode_files(body.files);
    }
    if let Ok(body) = serde_json::from_slice::<SessionBody>(data) {
        if let Ok(options) = options_from(&body.limits, None) {
            let _ = caps.bound(options, &body.limits, false);
        }
        for spec in body.tools {
            let _ = rsandbox::Tool::new(spec, |_| Ok(serde_json::Value::Null));
        }
    }
    if let Ok(body) = serde_json::from_slice::<ExecuteBody>(data) {
        let _ = rsandbox::options::validate_code(&body.code);
    }
    let _ = serde_json::from_slice::<ToolReply>(data);
});
