//! Files in and out of a session's workspace, served by the child between evaluations,
//! and which of the workspace's directories are the harness's own (never listed).
//!
//! The child does this, not the supervisor: the workspace is a tmpfs in the child's own
//! mount namespace, and the child is locked down, so even a path the checks below
//! missed could only reach what the sandbox may reach anyway. The checks: a relative
//! path of plain components (no `..`, `.`, empty or NUL), every directory opened with
//! `O_NOFOLLOW | O_DIRECTORY` and the file with `O_NOFOLLOW` (a symlink anywhere on the
//! way is refused, whoever made it), and only regular files are read (a FIFO is opened
//! non-blocking and refused).

use rustix::fs::{fstat, mkdirat, openat, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use wire::messages::{FileEntry, MAX_LISTED_FILES};

/// Name of the plot directory inside the workspace.
pub const PLOT_DIR: &str = ".rsandbox-plots";

/// Directories of the harness, not of the user: never listed.
const HIDDEN: [&str; 1] = [PLOT_DIR];

/// The components of a workspace-relative path, or why it is refused.
pub fn components(path: &str) -> Result<Vec<&str>, String> {
    wire::names::workspace_path(path)
}

fn open_dir(parent: impl AsFd, name: impl rustix::path::Arg) -> Result<OwnedFd, Errno> {
    openat(parent, name, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
}

fn explain(path: &str, e: Errno) -> String {
    match e {
        Errno::LOOP | Errno::NOTDIR => format!("{path:?} goes through a symlink or a non-directory"),
        Errno::NOENT => format!("{path:?} does not exist"),
        other => format!("{path:?}: {other}"),
    }
}

/// Walk to the directory holding the last component; `create` makes missing ones.
fn parent_dir(workspace: &Path, parts: &[&str], path: &str, create: bool) -> Result<OwnedFd, String> {
    let mut dir = open_dir(rustix::fs::CWD, workspace).map_err(|e| explain(path, e))?;
    for part in &parts[..parts.len() - 1] {
        if create {
            match mkdirat(&dir, *part, Mode::from_raw_mode(0o700)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(explain(path, e)),
            }
        }
        dir = open_dir(&dir, *part).map_err(|e| explain(path, e))?;
    }
    Ok(dir)
}

/// Write `data` to `path` (replacing a regular file; refusing anything else).
pub fn put(workspace: &Path, path: &str, data: &[u8]) -> Result<u64, String> {
    let parts = components(path)?;
    let dir = parent_dir(workspace, &parts, path, true)?;
    let name = parts[parts.len() - 1];
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = openat(&dir, name, flags, Mode::from_raw_mode(0o600)).map_err(|e| explain(path, e))?;
    let stat = fstat(&fd).map_err(|e| explain(path, e))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(format!("{path:?} is not a regular file"));
    }
    let mut file = File::from(fd);
    // ENOSPC here is the disk quota speaking.
    file.write_all(data).map_err(|e| format!("{path:?}: {e}"))?;
    Ok(data.len() as u64)
}

/// Read a regular file of at most `max_bytes`.
pub fn get(workspace: &Path, path: &str, max_bytes: u64) -> Result<Vec<u8>, String> {
    let parts = components(path)?;
    let dir = parent_dir(workspace, &parts, path, false)?;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = openat(&dir, parts[parts.len() - 1], flags, Mode::empty()).map_err(|e| explain(path, e))?;
    let stat = fstat(&fd).map_err(|e| explain(path, e))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(format!("{path:?} is not a regular file"));
    }
    let size = stat.st_size as u64;
    if size > max_bytes {
        return Err(format!("{path:?} has {size} bytes, over the limit of {max_bytes}"));
    }
    let mut data = Vec::with_capacity(size as usize);
    // One byte more than allowed tells a file that grew meanwhile.
    File::from(fd).take(max_bytes + 1).read_to_end(&mut data).map_err(|e| format!("{path:?}: {e}"))?;
    if data.len() as u64 > max_bytes {
        return Err(format!("{path:?} is over the limit of {max_bytes} bytes"));
    }
    Ok(data)
}

/// Every regular file under the workspace (symlinks and special files skipped, the
/// harness's own directories hidden), sorted; `true` when there were more than a
/// listing carries.
pub fn list(workspace: &Path) -> Result<(Vec<FileEntry>, bool), String> {
    let mut files = Vec::new();
    let root = open_dir(rustix::fs::CWD, workspace).map_err(|e| explain(".", e))?;
    let mut truncated = false;
    walk(root, "", &mut files, &mut truncated, 0)?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((files, truncated))
}

fn walk(
    dir: OwnedFd,
    prefix: &str,
    files: &mut Vec<FileEntry>,
    truncated: &mut bool,
    depth: usize,
) -> Result<(), String> {
    if depth > 64 {
        *truncated = true;
        return Ok(());
    }
    let entries = rustix::fs::Dir::read_from(&dir).map_err(|e| format!("cannot list {prefix:?}: {e}"))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {prefix:?}: {e}"))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "." || name == ".." || (depth == 0 && HIDDEN.contains(&name.as_str())) {
            continue;
        }
        let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
        if files.len() >= MAX_LISTED_FILES {
            *truncated = true;
            return Ok(());
        }
        let stat = rustix::fs::statat(&dir, name.as_str(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| format!("cannot inspect {path:?}: {e}"))?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => files.push(FileEntry { path, size: stat.st_size as u64 }),
            FileType::Directory => {
                let sub = open_dir(&dir, name.as_str()).map_err(|e| explain(&path, e))?;
                walk(sub, &path, files, truncated, depth + 1)?;
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("rsandbox-files-{name}-{}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn files_round_trip_and_symlinks_fifos_and_oversize_are_refused() {
        let ws = scratch("rules");
        assert_eq!(put(&ws, "data/in.csv", b"a,b\n").unwrap(), 4);
        assert_eq!(get(&ws, "data/in.csv", 100).unwrap(), b"a,b\n");
        assert!(get(&ws, "data/in.csv", 3).unwrap_err().contains("over the limit"));
        std::os::unix::fs::symlink("/etc/passwd", ws.join("link")).unwrap();
        assert!(get(&ws, "link", 1 << 20).unwrap_err().contains("symlink"));
        assert!(put(&ws, "link", b"x").is_err());
        std::os::unix::fs::symlink("/etc", ws.join("dirlink")).unwrap();
        assert!(get(&ws, "dirlink/passwd", 1 << 20).unwrap_err().contains("symlink"));
        assert!(put(&ws, "dirlink/new", b"x").is_err());
        let fifo = std::ffi::CString::new(ws.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a valid C string path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(get(&ws, "fifo", 100).unwrap_err().contains("not a regular file"));
        let (files, truncated) = list(&ws).unwrap();
        assert!(!truncated);
        assert_eq!(files, vec![FileEntry { path: "data/in.csv".into(), size: 4 }]);
        std::fs::remove_dir_all(&ws).unwrap();
    }
}
