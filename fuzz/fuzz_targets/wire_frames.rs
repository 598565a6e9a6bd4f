//! The frame decoder and every message the supervisor parses from a child (framed
//! `ChildReport`s) or from the zygote (one `ZygoteEvent` per seqpacket message), plus the
//! requests the other ends parse, and the tool-call check a `ToolCall` report meets.
//!
//! Input: one byte choosing how the rest arrives in pieces, then the bytes of the stream.
//! Checked: nothing panics; the decoder never hands out more bytes than it got; every
//! message that decodes re-encodes to a frame that decodes to the same JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::sync::OnceLock;
use wire::child_link::ChildReports;
use wire::frame::{self, FrameDecoder};
use wire::messages::{ChildReport, ChildRequest, ZygoteEvent, ZygoteRequest};

/// The largest frame this target accepts (the real 64 MiB would only slow it down).
const MAX: usize = 1 << 16;

fn tools() -> &'static [rsandbox::Tool] {
    static TOOLS: OnceLock<Vec<rsandbox::Tool>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let spec: rsandbox::ToolSpec = serde_json::from_value(serde_json::json!({
            "name": "add", "description": "adds", "args": {"a": "numeric", "b": "numeric"}
        }))
        .expect("a tool spec");
        vec![rsandbox::Tool::new(spec, |_| Ok(serde_json::Value::Null)).expect("a valid tool")]
    })
}

/// Decode `body` as `T`; if it decodes, its encoding decodes to the same JSON.
fn round_trip<T: Serialize + DeserializeOwned>(body: &[u8]) -> Option<T> {
    let value: T = frame::decode(body).ok()?;
    let encoded = frame::encode(&value).expect("a decoded message encodes");
    let again: T = frame::decode(&frame::read_body(&encoded[..], usize::MAX).expect("its frame reads"))
        .expect("an encoded message decodes");
    assert_eq!(serde_json::to_value(&value).unwrap(), serde_json::to_value(&again).unwrap());
    Some(value)
}

fn every_message(body: &[u8]) {
    if let Some(report) = round_trip::<ChildReport>(body) {
        let _ = report.tag();
        if let ChildReport::ToolCall { tool, args, .. } = &report {
            let _ = rsandbox::tools::check_call(tools(), tool, args);
            let _ = rsandbox::quote_excerpt(tool);
        }
    }
    if let Some(event) = round_trip::<ZygoteEvent>(body) {
        let _ = event.tag();
    }
    if let Some(request) = round_trip::<ChildRequest>(body) {
        let _ = request.tag();
    }
    let _ = round_trip::<ZygoteRequest>(body);
}

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, stream)) = data.split_first() else { return };
    let chunk = usize::from(chunk).max(1);

    // The supervisor's non-blocking end: bytes in pieces, frames out.
    let mut decoder = FrameDecoder::default();
    let mut reports = ChildReports::default();
    let mut taken = 0;
    let mut decoder_failed = false;
    for piece in stream.chunks(chunk) {
        decoder.push(piece);
        reports.push(piece);
        while !decoder_failed {
            match decoder.next_frame(MAX) {
                Ok(Some(body)) => {
                    taken += 4 + body.len();
                    every_message(&body);
                }
                Ok(None) => break,
                Err(_) => decoder_failed = true,
            }
        }
        // MAX_FRAME is 64 MiB: at most as many frames as the input holds come out.
        while let Ok(Some(report)) = reports.next_report() {
            let _ = report.tag();
        }
    }
    if !decoder_failed {
        assert_eq!(taken + decoder.buffered(), stream.len());
    }

    // A blocking read of one frame.
    if let Ok(body) = frame::read_body(stream, MAX) {
        assert!(body.len() <= MAX && body.len() + 4 <= stream.len());
    }

    // A zygote event or request is one seqpacket message: JSON without a length prefix.
    every_message(stream);
});
