//! Messages between the three processes.
//!
//! * supervisor <-> zygote: one message per `SOCK_SEQPACKET` packet (JSON), with fds
//!   passed alongside (`SCM_RIGHTS`); see [`crate::channel`].
//! * supervisor <-> sandbox child: a `SOCK_STREAM` socketpair created before the fork,
//!   carrying length-prefixed JSON frames ([`write_frame`], [`read_frame`]).

use lockdown::{Applied, Policy};
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::path::PathBuf;

/// Largest frame either side accepts on a child's channel: a result carries the value
/// (bounded by the output limit) and plots.
pub const MAX_FRAME: usize = 64 << 20;

/// Supervisor to zygote.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ZygoteRequest {
    /// Fork a sandbox child. Carries four fds, in order: the child's channel, stdout and
    /// stderr write ends, violation-report write end.
    Spawn {
        /// Request id, echoed in the replies.
        req: u64,
        /// The lockdown the child applies to itself.
        policy: Policy,
        /// The child's private workspace (its cwd, HOME and TMPDIR).
        workspace: PathBuf,
        /// Environment of the child, complete (nothing else is inherited).
        env: Vec<(String, String)>,
        /// Host tools to define in the child, before it reports `LockedDown`.
        tools: Vec<ToolStub>,
    },
}

/// What the child needs to know about a host tool: its name and argument names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolStub {
    /// The R function name.
    pub name: String,
    /// Its formal arguments, in order.
    pub args: Vec<String>,
}

/// Number of fds a [`ZygoteRequest::Spawn`] carries.
pub const SPAWN_FDS: usize = 4;

/// Zygote to supervisor.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum ZygoteEvent {
    /// R is up; sent once at start-up.
    Ready {
        /// `R.version.string`.
        r_version: String,
        /// `R.home()`.
        r_home: PathBuf,
        /// `.libPaths()`.
        library_paths: Vec<PathBuf>,
        /// Packages loaded before forking.
        preloaded: Vec<String>,
    },
    /// R failed to start or a preload failed; the zygote exits after this.
    StartFailed {
        /// What went wrong.
        error: String,
    },
    /// A child was forked; a pidfd for it travels with this message.
    Spawned {
        /// Request id.
        req: u64,
        /// The child's pid (also its process group).
        pid: i32,
    },
    /// The fork failed.
    SpawnFailed {
        /// Request id.
        req: u64,
        /// Why.
        error: String,
    },
    /// A child has exited and everything in its process group has been killed.
    Exited {
        /// Request id.
        req: u64,
        /// Exit code, when it exited.
        code: Option<i32>,
        /// Terminating signal, when killed.
        signal: Option<i32>,
        /// User + system CPU time of the child and its waited-for descendants.
        cpu_ms: u64,
        /// Peak resident set size.
        max_rss_kb: u64,
    },
}

/// Supervisor to child.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ChildRequest {
    /// Evaluate code (state persists to the next `Eval` in a session).
    Eval {
        /// R source code.
        code: String,
    },
    /// The answer to a `ToolCall`.
    ToolReply {
        /// The call id.
        call: u64,
        /// The value (JSON), when the tool succeeded.
        value: Option<serde_json::Value>,
        /// The error text, when it failed or was refused.
        error: Option<String>,
    },
}

/// Child to supervisor.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ChildReport {
    /// The lockdown could not be applied; nothing ran.
    SetupFailed {
        /// The error chain.
        error: String,
    },
    /// Layers applied, user code about to run.
    LockedDown {
        /// What was enforced.
        applied: Applied,
    },
    /// Evaluation finished.
    Evaluated {
        /// The R side's JSON result (see `eval.R`).
        r: serde_json::Value,
        /// PNG files drawn, base64.
        plots: Vec<String>,
        /// CPU used by the child (and its waited-for children) so far.
        cpu_ms: u64,
        /// Peak resident set size so far.
        max_rss_kb: u64,
    },
    /// User code called a host tool; the child waits for a `ToolReply`.
    ToolCall {
        /// Call id, unique within the child.
        call: u64,
        /// Tool name.
        tool: String,
        /// Arguments, as JSON (an object).
        args: serde_json::Value,
    },
    /// User code called `q()`/`quit()`.
    Quit {
        /// The status it asked for.
        status: i32,
    },
}

/// Write one length-prefixed JSON frame.
pub fn write_frame<T: Serialize>(mut w: impl Write, value: &T) -> io::Result<()> {
    let body = serde_json::to_vec(value).map_err(io::Error::other)?;
    let len = u32::try_from(body.len()).map_err(|_| io::Error::other("frame too large"))?;
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(&body);
    w.write_all(&buf)
}

/// Read one length-prefixed JSON frame; refuses frames over `max` bytes.
pub fn read_frame<T: for<'de> Deserialize<'de>>(mut r: impl Read, max: usize) -> io::Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("frame of {len} bytes exceeds {max}")));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    serde_json::from_slice(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Incremental decoder for length-prefixed frames arriving in pieces (non-blocking reads).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_oversize_is_refused() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &ChildRequest::Eval { code: "1+1".into() }).unwrap();
        let back: ChildRequest = read_frame(&buf[..], 1024).unwrap();
        assert!(matches!(back, ChildRequest::Eval { code } if code == "1+1"));
        let err = read_frame::<ChildRequest>(&buf[..], 4).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn decoder_waits_for_whole_frames() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &ChildRequest::Eval { code: "x".into() }).unwrap();
        let mut d = FrameDecoder::default();
        d.push(&buf[..3]);
        assert!(d.next_frame(100).unwrap().is_none());
        d.push(&buf[3..]);
        let body = d.next_frame(100).unwrap().unwrap();
        assert_eq!(body, br#"{"op":"eval","code":"x"}"#);
        d.push(&[0xff, 0xff, 0xff, 0xff]);
        assert!(d.next_frame(100).is_err());
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(serde_json::from_str::<ChildRequest>(r#"{"op":"eval","code":"1","extra":2}"#).is_err());
    }
}
