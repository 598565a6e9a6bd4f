//! Files in and out of a sandbox's workspace, and session snapshots: requests the
//! child serves between evaluations (it alone sees its workspace, a tmpfs in its own
//! mount namespace). The supervisor checks paths and sizes before asking and sizes
//! again on the way back; it never opens a path in the workspace itself.

use crate::child::SandboxChild;
use crate::errors::{EngineError, InputError};
use crate::result::WorkspaceFile;
use base64::Engine as _;
use wire::messages::{ChildReport, ChildRequest, FileEntry};

fn refused(why: impl Into<String>) -> EngineError {
    InputError::Workspace(why.into()).into()
}

fn unexpected(child: &mut SandboxChild, what: &str, got: ChildReport) -> EngineError {
    child.kill();
    EngineError::Setup(format!("expected {what} from the sandbox child, got {}", got.tag()))
}

/// Write `data` to `path` in the workspace. `max_bytes`: the disk quota (and output
/// limit) the caller allows for one file.
pub(crate) fn put(child: &mut SandboxChild, path: &str, data: &[u8], max_bytes: u64) -> Result<u64, EngineError> {
    wire::names::workspace_path(path).map_err(refused)?;
    if data.len() as u64 > max_bytes {
        return Err(refused(format!("{path:?} has {} bytes, over the limit of {max_bytes}", data.len())));
    }
    let request = ChildRequest::PutFile {
        path: path.to_string(),
        data_base64: base64::engine::general_purpose::STANDARD.encode(data),
    };
    match child.exchange(&request, "file_written")? {
        ChildReport::FileWritten { size } => Ok(size),
        ChildReport::Refused { error } => Err(refused(error)),
        other => Err(unexpected(child, "file_written", other)),
    }
}

/// Read a regular file of at most `max_bytes` from the workspace.
pub(crate) fn get(child: &mut SandboxChild, path: &str, max_bytes: u64) -> Result<WorkspaceFile, EngineError> {
    wire::names::workspace_path(path).map_err(refused)?;
    match child.exchange(&ChildRequest::GetFile { path: path.to_string(), max_bytes }, "file_content")? {
        ChildReport::FileContent { size, data_base64 } => {
            // The child's word is not trusted: the size is checked on what arrived.
            let decoded = base64::engine::general_purpose::STANDARD.decode(&data_base64).map_err(|e| {
                child.kill();
                EngineError::Setup(format!("the sandbox sent a file that is not base64: {e}"))
            })?;
            if decoded.len() as u64 > max_bytes || decoded.len() as u64 != size {
                child.kill();
                return Err(EngineError::Setup(format!(
                    "the sandbox sent {} bytes for {path:?} (said {size}, limit {max_bytes})",
                    decoded.len()
                )));
            }
            Ok(WorkspaceFile { path: path.to_string(), size, data_base64 })
        }
        ChildReport::Refused { error } => Err(refused(error)),
        other => Err(unexpected(child, "file_content", other)),
    }
}

/// The workspace's regular files; `true` when the listing was cut.
pub(crate) fn list(child: &mut SandboxChild) -> Result<(Vec<FileEntry>, bool), EngineError> {
    match child.exchange(&ChildRequest::ListFiles, "file_list")? {
        ChildReport::FileList { files, truncated } => Ok((files, truncated)),
        ChildReport::Refused { error } => Err(refused(error)),
        other => Err(unexpected(child, "file_list", other)),
    }
}

/// The files matching any of `patterns` (globs over workspace paths: `*.csv`,
/// `out/**/*.png`), at most `max_total` bytes in all; `true` when some matching files
/// were left out (over the budget, or beyond what a listing carries).
pub(crate) fn collect(
    child: &mut SandboxChild,
    patterns: &[String],
    max_total: u64,
) -> Result<(Vec<WorkspaceFile>, bool), EngineError> {
    if patterns.is_empty() {
        return Ok((Vec::new(), false));
    }
    let globs = patterns
        .iter()
        .map(|p| glob::Pattern::new(p).map_err(|e| refused(format!("invalid pattern {p:?}: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let options = glob::MatchOptions { require_literal_separator: true, ..glob::MatchOptions::new() };
    let (files, mut truncated) = list(child)?;
    let mut left = max_total;
    let mut collected = Vec::new();
    for entry in files.iter().filter(|f| globs.iter().any(|g| g.matches_with(&f.path, options))) {
        if entry.size > left {
            truncated = true;
            continue;
        }
        match get(child, &entry.path, left) {
            Ok(file) => {
                left -= file.size;
                collected.push(file);
            }
            // Changed since the listing (grew, became a link): left out, said so.
            Err(EngineError::Input(_)) => truncated = true,
            Err(e) => return Err(e),
        }
    }
    Ok((collected, truncated))
}

/// A snapshot of the session's global environment: opaque base64 (R's serialization,
/// only ever read inside a sandbox), and the names that could not be saved.
pub(crate) fn snapshot(child: &mut SandboxChild) -> Result<(String, Vec<String>), EngineError> {
    match child.exchange(&ChildRequest::Snapshot, "snapshot")? {
        ChildReport::Snapshot { data_base64, not_saved } => Ok((data_base64, not_saved)),
        ChildReport::Refused { error } => Err(refused(error)),
        other => Err(unexpected(child, "snapshot", other)),
    }
}

/// Load a snapshot into the child's global environment; R's warnings come back.
pub(crate) fn restore(child: &mut SandboxChild, data_base64: &str) -> Result<Vec<String>, EngineError> {
    base64::engine::general_purpose::STANDARD
        .decode(data_base64)
        .map_err(|e| refused(format!("the snapshot is not base64: {e}")))?;
    match child.exchange(&ChildRequest::Restore { data_base64: data_base64.to_string() }, "restored")? {
        ChildReport::Restored { warnings } => Ok(warnings),
        ChildReport::Refused { error } => Err(refused(error)),
        other => Err(unexpected(child, "restored", other)),
    }
}
