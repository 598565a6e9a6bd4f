//! Step 5: resource limits, after Landlock (which needs one fd per rule: a small
//! open-files limit set first could break the ruleset). Hard limits equal soft ones so the sandbox cannot raise them
//! back, except CPU: its hard limit is one second later, so the process first gets SIGXCPU
//! (a death reason that says "CPU limit") rather than an anonymous SIGKILL.

use crate::errors::RlimitError;
use crate::policy::Limits;
use crate::sys;

/// Size of the address space right now, in bytes (from /proc/self/statm). Read before
/// Landlock closes /proc.
pub fn current_address_space() -> Result<u64, RlimitError> {
    // One open, one read and one close: `statm` is a line of at most 7 numbers, and a
    // forked child's first `/proc` calls are slow (`fs::read_to_string` would add a
    // `statx` for its size and a second read for the end of the file).
    let file = rustix::fs::open("/proc/self/statm", rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC, 0.into())
        .map_err(|e| RlimitError::Baseline(e.into()))?;
    let mut buffer = [0u8; 256];
    let read = rustix::io::read(&file, &mut buffer).map_err(|e| RlimitError::Baseline(e.into()))?;
    let statm = std::str::from_utf8(&buffer[..read]).unwrap_or("");
    let pages: u64 = statm
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| RlimitError::Baseline(std::io::Error::other("unreadable statm")))?;
    let page = rustix::param::page_size() as u64;
    Ok(pages * page)
}

/// Apply the limits. `address_space_now` is the baseline the memory limit adds to.
pub fn apply_limits(limits: &Limits, address_space_now: u64) -> Result<(), RlimitError> {
    use rustix::process::Resource;
    let table: [(&'static str, Resource, Option<u64>); 7] = [
        ("RLIMIT_CORE", Resource::Core, Some(0)),
        ("RLIMIT_AS", Resource::As, limits.memory.map(|m| address_space_now.saturating_add(m))),
        ("RLIMIT_CPU", Resource::Cpu, limits.cpu_seconds),
        ("RLIMIT_FSIZE", Resource::Fsize, limits.file_size),
        ("RLIMIT_NPROC", Resource::Nproc, limits.processes),
        ("RLIMIT_NOFILE", Resource::Nofile, limits.open_files),
        ("RLIMIT_STACK", Resource::Stack, limits.stack),
    ];
    for (name, resource, value) in table {
        if let Some(value) = value {
            let hard = if resource == Resource::Cpu { value.saturating_add(1) } else { value };
            sys::set_rlimit(resource, value, hard).map_err(|source| RlimitError::Set { name, value, source })?;
        }
    }
    Ok(())
}
