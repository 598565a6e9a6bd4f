//! Length-prefixed JSON frames on a stream (the supervisor <-> child channel): a 4-byte
//! big-endian length, then that many bytes of JSON.

use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

/// Largest frame either side accepts on a child's channel: a result carries the value
/// (bounded by the output limit) and plots.
pub const MAX_FRAME: usize = 64 << 20;

/// Encode one frame (length prefix + JSON body).
pub fn encode<T: Serialize>(value: &T) -> io::Result<Vec<u8>> {
    let body = serde_json::to_vec(value).map_err(io::Error::other)?;
    let len = u32::try_from(body.len()).map_err(|_| io::Error::other("frame too large"))?;
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(&body);
    Ok(buf)
}

/// Write one frame.
pub fn write_frame<T: Serialize>(mut w: impl Write, value: &T) -> io::Result<()> {
    w.write_all(&encode(value)?)
}

/// Read one frame's body; refuses frames over `max` bytes.
pub fn read_body(mut r: impl Read, max: usize) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("frame of {len} bytes exceeds {max}")));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(body)
}

/// Incremental decoder for frames arriving in pieces (non-blocking reads).
#[derive(Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
}

impl FrameDecoder {
    /// Append received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes buffered so far.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Take the next complete frame's body, if one is buffered. Errors on oversize.
    pub fn next_frame(&mut self, max: usize) -> io::Result<Option<Vec<u8>>> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len > max {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("frame of {len} bytes exceeds {max}")));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let body = self.buf[4..4 + len].to_vec();
        self.buf.drain(..4 + len);
        Ok(Some(body))
    }
}

/// Decode a frame body read with [`read_body`] or [`FrameDecoder`].
pub fn decode<T: for<'de> Deserialize<'de>>(body: &[u8]) -> io::Result<T> {
    serde_json::from_slice(body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_oversize_is_refused() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &serde_json::json!({"op": "eval"})).unwrap();
        let back: serde_json::Value = decode(&read_body(&buf[..], 1024).unwrap()).unwrap();
        assert_eq!(back["op"], "eval");
        assert_eq!(read_body(&buf[..], 4).unwrap_err().kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn decoder_waits_for_whole_frames() {
        let buf = encode(&serde_json::json!({"code": "x"})).unwrap();
        let mut d = FrameDecoder::default();
        d.push(&buf[..3]);
        assert!(d.next_frame(100).unwrap().is_none());
        d.push(&buf[3..]);
        assert_eq!(d.next_frame(100).unwrap().unwrap(), br#"{"code":"x"}"#);
        d.push(&[0xff, 0xff, 0xff, 0xff]);
        assert!(d.next_frame(100).is_err());
    }
}
