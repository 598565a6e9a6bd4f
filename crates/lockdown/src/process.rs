//! Step 1: detach from the caller's process group, die with the parent, shed inherited fds.

use crate::errors::ProcessError;
use crate::sys;
use std::os::fd::RawFd;

/// Put the process in its own group (so the supervisor can kill everything it starts
/// with one signal, and meter it as one), make it the subreaper of its descendants (an
/// orphan is reparented to it, not to the host's init, and its CPU reaches this
/// process's `cutime` when reaped), arm SIGKILL on parent death, and close every fd
/// from `keep_below` up but those in `keep` (a root template's namespaces, closed by
/// [`close_kept_fds`] once used).
pub fn isolate_process(keep_below: RawFd, keep: &[RawFd], expected_parent: libc::pid_t) -> Result<(), ProcessError> {
    // The zygote also calls setpgid on the child right after fork; EPERM here then means
    // "already a group leader", which getpgrp confirms.
    if let Err(e) = sys::new_process_group() {
        // SAFETY: getpid/getpgrp take no arguments and cannot fail.
        if unsafe { libc::getpgrp() != libc::getpid() } {
            return Err(ProcessError::ProcessGroup(e));
        }
    }
    sys::set_child_subreaper().map_err(ProcessError::Subreaper)?;
    sys::set_parent_death_signal(libc::SIGKILL).map_err(ProcessError::ParentDeathSignal)?;
    // The parent may have died between fork and prctl; then nobody would kill us.
    // SAFETY: getppid takes no arguments and cannot fail.
    if unsafe { libc::getppid() } != expected_parent {
        return Err(ProcessError::ParentGone);
    }
    let mut kept: Vec<RawFd> = keep.iter().copied().filter(|fd| *fd >= keep_below).collect();
    kept.sort_unstable();
    let mut first = keep_below;
    for fd in kept {
        sys::close_fd_range(first, fd - 1).map_err(ProcessError::CloseFds)?;
        first = fd + 1;
    }
    sys::close_fds_from(first).map_err(ProcessError::CloseFds)
}

/// Close the fds [`isolate_process`] kept, one `close_range` per run of consecutive
/// numbers: a root template's opened paths are made one after another, so their ~20 fds
/// close in one or two calls instead of one each (issue #26).
pub fn close_kept_fds(fds: &[RawFd]) -> Result<(), ProcessError> {
    let mut sorted = fds.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    for run in sorted.chunk_by(|a, b| a + 1 == *b) {
        sys::close_fd_range(run[0], run[run.len() - 1]).map_err(ProcessError::CloseFds)?;
    }
    Ok(())
}

/// `PR_SET_DUMPABLE 0`: /proc/self becomes root-owned and ptrace by same-uid peers is
/// refused. Runs after the identity switch: before it, /proc/self/uid_map would be
/// unwritable for an unprivileged user namespace, and a root `setresuid` resets the flag.
pub fn make_non_dumpable() -> Result<(), ProcessError> {
    sys::set_not_dumpable().map_err(ProcessError::Dumpable)
}
