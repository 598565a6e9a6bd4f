//! Learning mode ([`Policy::learning`]): the sandbox reports what it tries, and the
//! holder of its seccomp listener writes it down instead of ending the sandbox.
//!
//! Two kinds of report arrive on the listener:
//!
//! - **File calls** ([`OBSERVED_CALLS`]: opening, creating a directory, starting a
//!   program) are reported before they run. The holder reads the path from the caller's
//!   memory ([`read_observed_call`]) and lets the call go on
//!   (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): the call is then decided, as always, by
//!   Landlock and the mount namespace, so continuing grants nothing. The path read is
//!   the caller's to change until the kernel reads it again, so it is a record, never
//!   a decision: [`Policy::grants`] says whether the rules let it through.
//! - **Forbidden calls** (the seccomp table's violations) are still never executed; in
//!   learning mode the holder answers them with an error and lists them, rather than
//!   ending the sandbox, so the code runs on and shows what else it needs.
//!
//! This is the strace-free equivalent of reading Landlock's denials from the audit log:
//! it needs no root, no audit daemon and no host-wide state, and works the same as root,
//! as a user and in a container.

use crate::policy::Policy;
use crate::seccomp::Notification;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::fs::File;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// What a file call wants of its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FileAccess {
    /// Read a file or list a directory.
    Read,
    /// Create, truncate or write a file, or create a directory.
    Write,
    /// Start a program.
    Execute,
}

/// Where an observed call keeps its path, and what it asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PathCall {
    nr: libc::c_long,
    /// The argument holding the directory fd the path is relative to (`None`: the
    /// working directory).
    dirfd: Option<usize>,
    /// The argument pointing to the path.
    path: usize,
    /// How to tell reading from writing.
    access: AccessFrom,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AccessFrom {
    /// `open` flags in this argument.
    OpenFlags(usize),
    /// `open_how.flags` (the first 8 bytes) at the address in this argument.
    OpenHow(usize),
    /// Always this access.
    Always(FileAccess),
}

#[cfg(target_arch = "x86_64")]
const PATH_CALLS: [PathCall; 8] = [
    PathCall { nr: libc::SYS_open, dirfd: None, path: 0, access: AccessFrom::OpenFlags(1) },
    PathCall { nr: libc::SYS_openat, dirfd: Some(0), path: 1, access: AccessFrom::OpenFlags(2) },
    PathCall { nr: libc::SYS_openat2, dirfd: Some(0), path: 1, access: AccessFrom::OpenHow(2) },
    PathCall { nr: libc::SYS_creat, dirfd: None, path: 0, access: AccessFrom::Always(FileAccess::Write) },
    PathCall { nr: libc::SYS_mkdir, dirfd: None, path: 0, access: AccessFrom::Always(FileAccess::Write) },
    PathCall { nr: libc::SYS_mkdirat, dirfd: Some(0), path: 1, access: AccessFrom::Always(FileAccess::Write) },
    PathCall { nr: libc::SYS_execve, dirfd: None, path: 0, access: AccessFrom::Always(FileAccess::Execute) },
    PathCall { nr: libc::SYS_execveat, dirfd: Some(0), path: 1, access: AccessFrom::Always(FileAccess::Execute) },
];

/// The calls a learning sandbox reports before they run.
pub fn observed_calls() -> impl Iterator<Item = libc::c_long> {
    PATH_CALLS.iter().map(|c| c.nr)
}

/// Whether `nr` is one of [`observed_calls`].
pub fn is_observed(nr: i64) -> bool {
    PATH_CALLS.iter().any(|c| c.nr == nr)
}

/// One observed file call: the path as the sandbox named it, made absolute.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObservedCall {
    /// The absolute path, in the sandbox's view (the same as the host's for every tree
    /// the policy lists: the private root binds them at their own paths).
    pub path: PathBuf,
    /// What the call asked.
    pub access: FileAccess,
}

/// Longest path read from a caller (the kernel's `PATH_MAX`).
const PATH_MAX: usize = 4096;

/// Read the path and access of an observed file call from the caller, before answering
/// it. `Ok(None)`: not an observed call, or a path relative to something this cannot
/// name (then nothing is learned of it). Needs the right to read the caller's memory
/// (ptrace's): the holder is root, or the caller stays dumpable, which learning mode
/// arranges.
///
/// The caller may change its memory while this reads it: the answer describes what it
/// asked, not what the kernel will do (see [`Policy::grants`]). The caller's pid is
/// only known to be the caller's while the notification is pending: check it is still
/// pending after this returns before trusting the result.
pub fn read_observed_call(notification: &Notification) -> std::io::Result<Option<ObservedCall>> {
    let Some(call) = PATH_CALLS.iter().find(|c| c.nr == notification.syscall) else {
        return Ok(None);
    };
    let pid = notification.pid as libc::pid_t;
    let args = notification.args;
    // /proc/PID/mem rather than process_vm_readv: a container runtime's seccomp profile
    // refuses the latter without CAP_SYS_PTRACE, and both need the same right.
    let mem = File::open(format!("/proc/{pid}/mem"))?;
    let raw = read_c_string(&mem, args[call.path])?;
    let access = match call.access {
        AccessFrom::Always(access) => access,
        AccessFrom::OpenFlags(i) => open_access(args[i] as i32),
        AccessFrom::OpenHow(i) => {
            let mut flags = [0u8; 8];
            read_memory(&mem, args[i], &mut flags)?;
            open_access(u64::from_ne_bytes(flags) as i32)
        }
    };
    let path = PathBuf::from(OsString::from_vec(raw));
    if path.is_absolute() {
        return Ok(Some(ObservedCall { path, access }));
    }
    // Relative: to the working directory, or to the directory fd (low 32 bits, as the
    // kernel reads it).
    let base = match call.dirfd.map(|i| args[i] as i32) {
        None | Some(libc::AT_FDCWD) => format!("/proc/{pid}/cwd"),
        Some(fd) if fd >= 0 => format!("/proc/{pid}/fd/{fd}"),
        Some(_) => return Ok(None),
    };
    match std::fs::read_link(&base) {
        Ok(dir) if dir.is_absolute() => Ok(Some(ObservedCall { path: dir.join(path), access })),
        // A directory outside the reader's root, a socket, a pipe: nothing to name.
        Ok(_) => Ok(None),
        Err(e) => Err(e),
    }
}

fn open_access(flags: i32) -> FileAccess {
    if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & (libc::O_CREAT | libc::O_TRUNC) != 0 {
        FileAccess::Write
    } else {
        FileAccess::Read
    }
}

/// A NUL-terminated string at `address` in `mem`, read page by page (the string may end
/// just before an unmapped page).
fn read_c_string(mem: &File, address: u64) -> std::io::Result<Vec<u8>> {
    const PAGE: u64 = 4096;
    let mut out = Vec::new();
    let mut at = address;
    while out.len() < PATH_MAX {
        let chunk = ((PAGE - at % PAGE) as usize).min(PATH_MAX - out.len());
        let mut buf = vec![0u8; chunk];
        read_memory(mem, at, &mut buf)?;
        if let Some(end) = buf.iter().position(|b| *b == 0) {
            out.extend_from_slice(&buf[..end]);
            return Ok(out);
        }
        out.extend_from_slice(&buf);
        at += chunk as u64;
    }
    Err(std::io::Error::from_raw_os_error(libc::ENAMETOOLONG))
}

/// Fill `buf` from `address` in the memory `mem` (`/proc/PID/mem`) opens.
fn read_memory(mem: &File, address: u64, buf: &mut [u8]) -> std::io::Result<()> {
    mem.read_exact_at(buf, address)
}

impl Policy {
    /// Whether this policy's Landlock rules let `access` through on `path`, judged on
    /// the host: the same trees as [`crate::ruleset`]'s rules (read-only trees read,
    /// read-write trees read and write, executables read and execute), compared after
    /// resolving symbolic links as the rules do. A path that does not exist is judged by
    /// its directory (creating a file is a right on the directory).
    ///
    /// For learning only: it says what to add to a profile, and enforces nothing.
    pub fn grants(&self, path: &Path, access: FileAccess) -> bool {
        let Some(path) = resolve(path) else { return false };
        let beneath =
            |roots: &[PathBuf]| roots.iter().filter_map(|r| r.canonicalize().ok()).any(|r| path.starts_with(r));
        match access {
            FileAccess::Read => beneath(&self.read_only) || beneath(&self.read_write) || beneath(&self.executable),
            FileAccess::Write => beneath(&self.read_write),
            FileAccess::Execute => beneath(&self.executable),
        }
    }
}

/// `path` with its symbolic links resolved; for a path that does not exist, its
/// directory's resolved and its name appended.
fn resolve(path: &Path) -> Option<PathBuf> {
    if let Ok(found) = path.canonicalize() {
        return Some(found);
    }
    let name = path.file_name()?;
    Some(path.parent()?.canonicalize().ok()?.join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_flags_tell_reading_from_writing() {
        assert_eq!(open_access(libc::O_RDONLY | libc::O_CLOEXEC), FileAccess::Read);
        assert_eq!(open_access(libc::O_RDONLY | libc::O_DIRECTORY), FileAccess::Read);
        assert_eq!(open_access(libc::O_WRONLY), FileAccess::Write);
        assert_eq!(open_access(libc::O_RDWR), FileAccess::Write);
        assert_eq!(open_access(libc::O_RDONLY | libc::O_CREAT), FileAccess::Write);
        assert_eq!(open_access(libc::O_RDONLY | libc::O_TRUNC), FileAccess::Write);
    }

    #[test]
    fn grants_follows_the_rules_trees() {
        let dir = std::env::temp_dir().join(format!("lockdown-grants-{}", std::process::id()));
        let (ro, rw) = (dir.join("ro"), dir.join("rw"));
        std::fs::create_dir_all(&ro).unwrap();
        std::fs::create_dir_all(&rw).unwrap();
        std::fs::write(ro.join("data.csv"), "x").unwrap();
        std::os::unix::fs::symlink(&ro, dir.join("link")).unwrap();
        let policy = Policy {
            read_only: vec![ro.clone()],
            read_write: vec![rw.clone()],
            executable: vec![PathBuf::from("/usr/bin/env")],
            ..Policy::default()
        };
        assert!(policy.grants(&ro.join("data.csv"), FileAccess::Read));
        assert!(policy.grants(&dir.join("link/data.csv"), FileAccess::Read), "through a link, as Landlock sees it");
        assert!(!policy.grants(&ro.join("data.csv"), FileAccess::Write));
        assert!(policy.grants(&rw.join("new.txt"), FileAccess::Write), "a file not yet created");
        assert!(!policy.grants(&dir.join("elsewhere.txt"), FileAccess::Write));
        assert!(!policy.grants(&dir, FileAccess::Read), "the parent of a tree is not in it");
        assert!(policy.grants(Path::new("/usr/bin/env"), FileAccess::Execute));
        assert!(!policy.grants(Path::new("/usr/bin/id"), FileAccess::Execute));
        assert!(!policy.grants(Path::new("/nonexistent/dir/file"), FileAccess::Read));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn strings_are_read_from_a_process_across_pages() {
        // Our own memory: a path that ends two bytes into the second of two pages.
        let mut buf = vec![b'a'; 3 * 4096];
        let start = 4096 - (buf.as_ptr() as usize % 4096) + 4090;
        buf[start + 8] = 0;
        let mem = File::open("/proc/self/mem").unwrap();
        let got = read_c_string(&mem, buf.as_ptr() as u64 + start as u64).unwrap();
        assert_eq!(got, vec![b'a'; 8]);
        let too_long = vec![b'b'; PATH_MAX + 10];
        let err = read_c_string(&mem, too_long.as_ptr() as u64).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENAMETOOLONG));
    }
}
