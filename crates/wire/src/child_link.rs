//! The supervisor <-> sandbox child channel: length-prefixed frames on a stream
//! socketpair made before the fork. [`HostLink`] is the child's end (blocking, on a
//! fixed fd); [`ChildReports`] decodes what a child sends on the supervisor's
//! non-blocking end, and [`await_lockdown`]/[`await_tools_defined`] are the two blocking
//! steps of a child's start.

use crate::errors::{Peer, WireError};
use crate::frame::{self, FrameDecoder, MAX_FRAME};
use crate::messages::{ChildReport, ChildRequest};
use lockdown::Applied;
use std::fs::File;
use std::io::{self, Read};
use std::mem::ManuallyDrop;
use std::os::fd::{FromRawFd, RawFd};

/// The fd a sandbox child keeps its channel on.
pub const CHILD_CHANNEL_FD: RawFd = 3;

/// The child's end of its channel.
#[derive(Clone, Copy, Debug)]
pub struct HostLink {
    fd: RawFd,
}

impl HostLink {
    /// The channel on `fd`.
    ///
    /// # Safety
    /// `fd` must be this process's open channel for as long as any `HostLink` on it is
    /// used, and nothing may close it meanwhile (the link never closes it).
    pub unsafe fn on_fd(fd: RawFd) -> HostLink {
        HostLink { fd }
    }

    fn stream(&self) -> ManuallyDrop<File> {
        // SAFETY: `on_fd`'s contract keeps the fd open; ManuallyDrop keeps this
        // temporary File from closing it.
        ManuallyDrop::new(unsafe { File::from_raw_fd(self.fd) })
    }

    /// Send a report.
    pub fn report(&self, report: &ChildReport) -> Result<(), WireError> {
        frame::write_frame(&*self.stream(), report).map_err(WireError::io("send a report", Peer::Supervisor))
    }

    /// The next request; `Ok(None)` when the supervisor closed the channel between
    /// requests (the child's normal end).
    pub fn next_request(&self) -> Result<Option<ChildRequest>, WireError> {
        match frame::read_body(&*self.stream(), MAX_FRAME) {
            Ok(body) => frame::decode(&body).map(Some).map_err(|e| malformed(Peer::Supervisor, e)),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(WireError::io("read a request", Peer::Supervisor)(e)),
        }
    }

    /// Ask the host to run a tool and wait for its answer: the value, or the error the
    /// host gives (refused, failed).
    pub fn call_tool(
        &self,
        call: u64,
        tool: String,
        args: serde_json::Value,
    ) -> Result<Result<serde_json::Value, String>, WireError> {
        self.report(&ChildReport::ToolCall { call, tool, args })?;
        let expected = "the tool_reply for the pending call";
        match self.next_request()? {
            Some(ChildRequest::ToolReply { call: answered, value, error }) if answered == call => Ok(match error {
                Some(e) => Err(e),
                None => Ok(value.unwrap_or(serde_json::Value::Null)),
            }),
            Some(other) => Err(WireError::Unexpected { peer: Peer::Supervisor, expected, got: other.tag() }),
            None => Err(WireError::Closed { peer: Peer::Supervisor, expected }),
        }
    }
}

fn malformed(peer: Peer, e: io::Error) -> WireError {
    WireError::Malformed { peer, detail: e.to_string() }
}

/// How a child's lockdown ended.
#[derive(Debug)]
pub enum Lockdown {
    /// Every layer the policy requires is in place, in this many microseconds.
    Applied(Applied, u64),
    /// The child could not lock itself down; nothing ran.
    Failed(String),
}

/// Read the child's first report (blocking; set a read timeout on the stream first).
pub fn await_lockdown(stream: impl Read) -> Result<Lockdown, WireError> {
    match read_report(stream, "locked_down")? {
        ChildReport::LockedDown { applied, lockdown_us } => Ok(Lockdown::Applied(applied, lockdown_us)),
        ChildReport::SetupFailed { error } => Ok(Lockdown::Failed(error)),
        other => Err(WireError::Unexpected { peer: Peer::Child, expected: "locked_down", got: other.tag() }),
    }
}

/// Read the answer to `DefineTools` (blocking): `Ok(Err(why))` when the child refused.
pub fn await_tools_defined(stream: impl Read) -> Result<Result<(), String>, WireError> {
    match read_report(stream, "tools_defined")? {
        ChildReport::ToolsDefined => Ok(Ok(())),
        ChildReport::ToolsFailed { error } => Ok(Err(error)),
        other => Err(WireError::Unexpected { peer: Peer::Child, expected: "tools_defined", got: other.tag() }),
    }
}

fn read_report(stream: impl Read, expected: &'static str) -> Result<ChildReport, WireError> {
    match frame::read_body(stream, MAX_FRAME) {
        Ok(body) => frame::decode(&body).map_err(|e| malformed(Peer::Child, e)),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(WireError::Closed { peer: Peer::Child, expected }),
        Err(e) => Err(WireError::io("read a report", Peer::Child)(e)),
    }
}

/// Encode a request for a child's non-blocking channel.
pub fn encode_request(request: &ChildRequest) -> Vec<u8> {
    frame::encode(request).expect("requests serialise")
}

/// Reports arriving in pieces on the supervisor's non-blocking end.
#[derive(Default)]
pub struct ChildReports {
    decoder: FrameDecoder,
}

impl ChildReports {
    /// Append received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.decoder.push(bytes);
    }

    /// Bytes received and not yet decoded (they count against the output limit).
    pub fn buffered(&self) -> usize {
        self.decoder.buffered()
    }

    /// The next complete report, if one has arrived.
    pub fn next_report(&mut self) -> Result<Option<ChildReport>, WireError> {
        match self.decoder.next_frame(MAX_FRAME).map_err(|e| malformed(Peer::Child, e))? {
            Some(body) => frame::decode(&body).map(Some).map_err(|e| malformed(Peer::Child, e)),
            None => Ok(None),
        }
    }
}

impl ChildReport {
    /// The message's tag, for errors.
    pub fn tag(&self) -> String {
        match self {
            ChildReport::SetupFailed { .. } => "setup_failed",
            ChildReport::LockedDown { .. } => "locked_down",
            ChildReport::Evaluated { .. } => "evaluated",
            ChildReport::ToolCall { .. } => "tool_call",
            ChildReport::ToolsDefined => "tools_defined",
            ChildReport::ToolsFailed { .. } => "tools_failed",
            ChildReport::Settled => "settled",
            ChildReport::Quit { .. } => "quit",
            ChildReport::Output { .. } => "output",
            ChildReport::FileWritten { .. } => "file_written",
            ChildReport::FileContent { .. } => "file_content",
            ChildReport::FileList { .. } => "file_list",
            ChildReport::Snapshot { .. } => "snapshot",
            ChildReport::Restored { .. } => "restored",
            ChildReport::Refused { .. } => "refused",
        }
        .to_string()
    }
}

impl ChildRequest {
    /// The message's tag, for errors.
    pub fn tag(&self) -> String {
        match self {
            ChildRequest::Eval { .. } => "eval",
            ChildRequest::DefineTools { .. } => "define_tools",
            ChildRequest::ToolReply { .. } => "tool_reply",
            ChildRequest::PutFile { .. } => "put_file",
            ChildRequest::GetFile { .. } => "get_file",
            ChildRequest::ListFiles => "list_files",
            ChildRequest::Snapshot => "snapshot",
            ChildRequest::Restore { .. } => "restore",
            ChildRequest::Settle => "settle",
        }
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_tool_call_waits_for_its_own_reply() {
        let (host, mut supervisor) = UnixStream::pair().unwrap();
        // SAFETY: `host` outlives every use of the link below.
        let link = unsafe { HostLink::on_fd(host.as_raw_fd()) };
        supervisor
            .write_all(&encode_request(&ChildRequest::ToolReply { call: 9, value: None, error: Some("x".into()) }))
            .unwrap();
        let err = link.call_tool(1, "add".into(), serde_json::json!({})).unwrap_err().to_string();
        assert_eq!(err, "expected the tool_reply for the pending call from the supervisor, got tool_reply");
        let mut reports = ChildReports::default();
        let mut buf = vec![0u8; 4096];
        let n = std::io::Read::read(&mut supervisor, &mut buf).unwrap();
        reports.push(&buf[..n]);
        assert!(matches!(reports.next_report().unwrap(), Some(ChildReport::ToolCall { call: 1, .. })));
        supervisor
            .write_all(&encode_request(&ChildRequest::ToolReply {
                call: 2,
                value: Some(serde_json::json!(3)),
                error: None,
            }))
            .unwrap();
        assert_eq!(link.call_tool(2, "add".into(), serde_json::json!({})).unwrap(), Ok(serde_json::json!(3)));
        // Take the second call off the socket: closing with unread data is a reset, not an end.
        let n = std::io::Read::read(&mut supervisor, &mut buf).unwrap();
        reports.push(&buf[..n]);
        assert!(matches!(reports.next_report().unwrap(), Some(ChildReport::ToolCall { call: 2, .. })));
        drop(supervisor);
        assert!(matches!(link.next_request(), Ok(None)));
    }

    #[test]
    fn lockdown_step_names_what_arrived() {
        let bytes = frame::encode(&ChildReport::Quit { status: 0 }).unwrap();
        let err = await_lockdown(&bytes[..]).unwrap_err().to_string();
        assert_eq!(err, "expected locked_down from the sandbox child, got quit");
        let err = await_lockdown(&[][..]).unwrap_err().to_string();
        assert_eq!(err, "the sandbox child closed the channel while we waited for locked_down");
        let garbage = frame::encode(&serde_json::json!({"kind": "locked_down", "extra": 1})).unwrap();
        assert!(matches!(await_lockdown(&garbage[..]), Err(WireError::Malformed { .. })));
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(serde_json::from_str::<ChildRequest>(r#"{"op":"eval","code":"1","extra":2}"#).is_err());
    }
}
