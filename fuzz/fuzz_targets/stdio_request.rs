//! The stdio protocol's request lines: what `serve --stdio` does with a line before any
//! engine is involved (the JSON, the op, the request's fields, its limits, files, base64
//! and tool specs).
#![no_main]

use fronts::request::{decode_base64, decode_files, options_from, Limits};
use fronts::stdio::{parse_request, Request};
use libfuzzer_sys::fuzz_target;

const CODES: [&str; 3] = ["parse_error", "invalid_request", "unknown_op"];

fuzz_target!(|data: &[u8]| {
    // The server refuses a line that is not UTF-8 before parsing it.
    let Ok(line) = std::str::from_utf8(data) else { return };
    let request = match parse_request(line) {
        Ok(request) => request,
        Err((_, code, _)) => {
            assert!(CODES.contains(&code.as_str()), "{code}");
            return;
        }
    };
    match request {
        Request::Eval { code, timeout, limits, files, .. } => {
            let _ = rsandbox::options::validate_code(&code);
            let _ = options_from(&limits, timeout);
            let _ = decode_files(files);
        }
        Request::SessionCreate { tools, limits, .. } => {
            let _ = options_from(&limits, None);
            for spec in tools {
                let _ = rsandbox::Tool::new(spec, |_| Ok(serde_json::Value::Null));
            }
        }
        Request::SessionExecute { code, timeout, .. } => {
            let _ = rsandbox::options::validate_code(&code);
            let _ = options_from(&Limits::default(), timeout);
        }
        Request::SessionPutFile { data_base64, .. } => {
            let _ = decode_base64(&data_base64);
        }
        _ => {}
    }
});
