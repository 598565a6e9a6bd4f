//! The audit log: one JSON object per line, each with a UTC timestamp (`timestamp`, and
//! `ts` as before) and the session or evaluation id (`session_id`, and `session` as
//! before), the field names securer's log readers expect.
//!
//! Which paths are accepted: a regular file (created 0600 when absent) that nobody else
//! can read, in an existing directory. Refused before anything is opened: a symlink (a
//! planted link must not redirect the log onto another file; `O_NOFOLLOW` closes the race
//! after the check), a device such as `/dev/null` or `/dev/full`, a FIFO, a socket, a
//! directory — so a server with a bad log refuses at start with a message naming the path,
//! never mid-session.
//!
//! The log is bounded whatever the sandbox does: what a sandbox chose (code, tool
//! arguments) goes in as an excerpt and a SHA-256 (code longer than [`CODE_EXCERPT`]
//! characters ends with `... [truncated]`, as securer's log), a record is at most
//! [`MAX_RECORD`] bytes, and when the file reaches its size cap it is rotated to `PATH.1`
//! (replacing the previous one), so the newest records are always kept and the disk holds
//! at most twice the cap.

use crate::errors::EngineError;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Longest code excerpt (characters) written to `execute_start`, securer's length; the
/// hash covers all of it.
pub const CODE_EXCERPT: usize = 10_000;
/// What ends a code excerpt that was cut (securer's marker).
pub const TRUNCATED_MARKER: &str = "... [truncated]";
/// Longest tool-argument excerpt written to `tool_call` (the hash covers all of it).
const ARGS_EXCERPT: usize = 500;
/// Longest record; a longer one is replaced by a `truncated` record naming its size.
/// Room for a whole code excerpt even when every character is escaped (`\u0000`).
pub const MAX_RECORD: usize = 64 << 10;
/// Default size at which the log is rotated.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;

/// An append-only JSONL audit log.
#[derive(Debug)]
pub struct AuditLog {
    path: std::path::PathBuf,
    max_bytes: u64,
    file: Mutex<(File, u64)>,
}

impl AuditLog {
    /// Open (or create, mode 0600) `path` for appending. Refuses symlinks and files that
    /// are not regular or are readable by others.
    pub fn open(path: &Path) -> Result<AuditLog, EngineError> {
        AuditLog::open_with_cap(path, DEFAULT_MAX_BYTES)
    }

    /// [`AuditLog::open`], rotated at `max_bytes`.
    pub fn open_with_cap(path: &Path, max_bytes: u64) -> Result<AuditLog, EngineError> {
        let file = open_private(path)?;
        let size = file.metadata().map_err(EngineError::io(format!("open the audit log {}", path.display())))?.len();
        Ok(AuditLog { path: path.to_owned(), max_bytes, file: Mutex::new((file, size)) })
    }

    /// Append one event. `fields` must be a JSON object; `timestamp` (and `ts`), `event`
    /// and `session_id` (and `session`) are added. Errors are reported on stderr: losing
    /// an audit line must not be silent, but it must not stop the evaluation either.
    pub fn record(&self, event: &str, session: &str, fields: Value) {
        let ts = utc_timestamp(SystemTime::now());
        let head = json!({"timestamp": ts, "ts": ts, "event": event, "session_id": session, "session": session});
        let mut line = head.clone();
        if let (Some(obj), Value::Object(extra)) = (line.as_object_mut(), fields) {
            obj.extend(extra);
        }
        let mut text = line.to_string();
        if text.len() > MAX_RECORD {
            let mut short = head;
            short["truncated"] = json!(true);
            short["bytes"] = json!(text.len());
            text = short.to_string();
        }
        text.push('\n');
        let mut guard = self.file.lock().expect("audit log");
        let (file, written) = &mut *guard;
        if *written + text.len() as u64 > self.max_bytes && *written > 0 {
            match self.rotate() {
                Ok(fresh) => (*file, *written) = (fresh, 0),
                Err(e) => crate::note!("rsandbox: failed to rotate the audit log: {e}"),
            }
        }
        match file.write_all(text.as_bytes()) {
            Ok(()) => *written += text.len() as u64,
            Err(e) => crate::note!("rsandbox: failed to write the audit log: {e}"),
        }
    }

    /// Move the full log to `PATH.1` and open a fresh one.
    fn rotate(&self) -> Result<File, EngineError> {
        let mut old = self.path.clone().into_os_string();
        old.push(".1");
        std::fs::rename(&self.path, &old)
            .map_err(EngineError::io(format!("rotate the audit log {}", self.path.display())))?;
        open_private(&self.path)
    }

    /// `tool_call` after the checks: the tool, an excerpt, the size and SHA-256 of the
    /// arguments, and the refusal if there was one.
    pub fn tool_call(&self, session: &str, tool: &str, args: &str, refused: Option<&str>) {
        let excerpt: String = args.chars().take(ARGS_EXCERPT).collect();
        let hash = hex(&Sha256::digest(args.as_bytes()));
        self.record(
            "tool_call",
            session,
            json!({"tool": tool, "args": excerpt, "args_bytes": args.len(), "args_sha256": hash, "refused": refused}),
        );
    }

    /// `execute_start` with the code's excerpt (marked `... [truncated]` when cut) and
    /// SHA-256.
    pub fn execute_start(&self, session: &str, code: &str) {
        let mut excerpt: String = code.chars().take(CODE_EXCERPT).collect();
        let truncated = excerpt.len() < code.len();
        if truncated {
            excerpt.push_str(TRUNCATED_MARKER);
        }
        let hash = hex(&Sha256::digest(code.as_bytes()));
        self.record(
            "execute_start",
            session,
            json!({"code": excerpt, "code_truncated": truncated, "code_sha256": hash}),
        );
    }
}

/// Open (or create, mode 0600) `path` for appending: no symlink, a regular file nobody
/// else can read. What is already there is looked at (`lstat`) before it is opened, so
/// a device, a FIFO (whose open would block) or a symlink is refused without being
/// touched; `O_NOFOLLOW` and the check after opening close the race with a swap.
fn open_private(path: &Path) -> Result<File, EngineError> {
    let what = format!("open the audit log {}", path.display());
    let refuse = |why: String| EngineError::Io { what: what.clone(), source: std::io::Error::other(why) };
    match std::fs::symlink_metadata(path) {
        Ok(meta) => check_kind(&meta).map_err(refuse)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(EngineError::io(what)(e)),
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refuse(check_kind_error("a symlink")),
            _ => EngineError::io(what.clone())(e),
        })?;
    let meta = file.metadata().map_err(EngineError::io(what.clone()))?;
    check_kind(&meta).map_err(refuse)?;
    Ok(file)
}

/// Why `meta` cannot be an audit log, in the operator's terms.
fn check_kind(meta: &std::fs::Metadata) -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    let other = if kind.is_symlink() {
        "a symlink"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device file"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_dir() {
        "a directory"
    } else if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "it is open to other users (mode {:04o}); the audit log must be mode 0600 (chmod 600 it, or name a new file)",
            meta.mode() & 0o7777
        ));
    } else {
        return Ok(());
    };
    Err(check_kind_error(other))
}

fn check_kind_error(kind: &str) -> String {
    format!("it is {kind}; the audit log must be a regular file (a new path is created 0600)")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC), without a date crate: days to civil date after
/// Howard Hinnant's algorithm.
pub fn utc_timestamp(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;

    #[test]
    fn timestamps_are_utc_iso8601() {
        assert_eq!(utc_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_000_000_123);
        assert_eq!(utc_timestamp(t), "2026-11-18T11:06:40.123Z");
    }

    #[test]
    fn log_is_private_and_symlinks_are_refused() {
        let dir = scratch("test");
        let path = dir.join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        log.execute_start("s1", "1 + 1");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let line = &records(&path)[0];
        assert_eq!(line["event"], "execute_start");
        assert_eq!(line["session"], "s1");
        assert_eq!(line["code_sha256"], hex(&Sha256::digest(b"1 + 1")));
        let link = dir.join("link.jsonl");
        std::os::unix::fs::symlink(dir.join("target"), &link).unwrap();
        let err = AuditLog::open(&link).unwrap_err();
        assert!(err.to_string().contains("link.jsonl"), "{err}");
        assert!(chain(&err).contains("it is a symlink"), "{err:?}");
        assert!(!dir.join("target").exists(), "the symlink must not be followed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A fresh directory for one test.
    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("rsandbox-audit-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The log's records.
    fn records(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// The error and its sources, as the CLI prints them.
    fn chain(err: &EngineError) -> String {
        let mut text = err.to_string();
        let mut source = std::error::Error::source(err);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        text
    }

    #[test]
    fn devices_fifos_and_shared_files_are_refused_without_being_opened() {
        for device in ["/dev/null", "/dev/full"] {
            let err = chain(&AuditLog::open(Path::new(device)).unwrap_err());
            assert!(err.contains(device) && err.contains("it is a device file"), "{err}");
        }
        let dir = scratch("kinds");
        // A FIFO with no reader: opening it for writing would block forever.
        let fifo = dir.join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(chain(&AuditLog::open(&fifo).unwrap_err()).contains("it is a FIFO"));
        assert!(chain(&AuditLog::open(&dir).unwrap_err()).contains("it is a directory"));
        let shared = dir.join("shared.jsonl");
        std::fs::write(&shared, "").unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = chain(&AuditLog::open(&shared).unwrap_err());
        assert!(err.contains("mode 0644") && err.contains("must be mode 0600"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn records_carry_securer_fields_and_long_code_is_marked_truncated() {
        let dir = scratch("fields");
        let path = dir.join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        let long = "1\n".repeat(CODE_EXCERPT);
        log.execute_start("s1", "1 + 1");
        log.execute_start("s1", &long);
        log.record("session_close", "s1", json!({}));
        let lines = records(&path);
        for line in &lines {
            assert_eq!(line["session_id"], "s1");
            assert_eq!(line["session"], "s1", "the old field stays");
            let ts = line["timestamp"].as_str().unwrap();
            assert!(ts.len() == 24 && ts.ends_with('Z') && line["ts"] == ts, "{line}");
        }
        assert_eq!((lines[0]["code"].as_str(), lines[0]["code_truncated"].as_bool()), (Some("1 + 1"), Some(false)));
        let cut = lines[1]["code"].as_str().unwrap();
        assert_eq!(cut, format!("{}{TRUNCATED_MARKER}", &long[..CODE_EXCERPT]));
        assert_eq!(lines[1]["code_truncated"], true);
        assert_eq!(lines[1]["code_sha256"], hex(&Sha256::digest(long.as_bytes())));
        assert_eq!(lines[2]["event"], "session_close");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_flood_of_tool_calls_leaves_a_bounded_log_with_the_newest_records() {
        let dir = scratch("cap");
        let path = dir.join("audit.jsonl");
        let log = AuditLog::open_with_cap(&path, 64 << 10).unwrap();
        let args = format!("{{\"x\":\"{}\"}}", "\\\"".repeat(200_000));
        for i in 0..500 {
            log.tool_call("s1", &format!("t{i}"), &args, Some("refused"));
        }
        log.record("huge", "s1", json!({"blob": "y".repeat(MAX_RECORD)}));
        let current = std::fs::read_to_string(&path).unwrap();
        let rotated = std::fs::read_to_string(dir.join("audit.jsonl.1")).unwrap();
        assert!(current.len() as u64 <= 64 << 10 && rotated.len() as u64 <= 64 << 10);
        let lines = records(&path);
        let last = lines.last().unwrap();
        assert_eq!((last["event"].as_str(), last["truncated"].as_bool()), (Some("huge"), Some(true)));
        let call = &lines[lines.len() - 2];
        assert_eq!(call["tool"], "t499");
        assert_eq!(call["args_bytes"], args.len());
        assert_eq!(call["args"].as_str().unwrap().chars().count(), ARGS_EXCERPT);
        assert_eq!(call["args_sha256"], hex(&Sha256::digest(args.as_bytes())));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
