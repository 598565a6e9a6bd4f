//! Every raw system call the crate makes, each behind a small safe wrapper.
//!
//! Wrappers return `io::Result` and never interpret the error: callers attach
//! the step they were in.

use std::io;
use std::os::fd::RawFd;

fn check(rc: libc::c_long) -> io::Result<libc::c_long> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn check_int(rc: libc::c_int) -> io::Result<()> {
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// `setpgid(0, 0)`: become the leader of a new process group.
pub fn new_process_group() -> io::Result<()> {
    // SAFETY: setpgid takes plain integers and touches no memory of ours.
    check_int(unsafe { libc::setpgid(0, 0) })
}

/// `prctl(PR_SET_PDEATHSIG, sig)`.
pub fn set_parent_death_signal(signal: libc::c_int) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes an integer signal number; no pointers.
    check_int(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong, 0, 0, 0) })
}

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)`: orphaned descendants are reparented to us.
pub fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: integer-only prctl.
    check_int(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })
}

/// `prctl(PR_SET_DUMPABLE, 0)`: /proc/self becomes root-owned and ptrace by peers is refused.
pub fn set_not_dumpable() -> io::Result<()> {
    // SAFETY: integer-only prctl.
    check_int(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) })
}

/// `prctl(PR_SET_NO_NEW_PRIVS, 1)`.
pub fn set_no_new_privs() -> io::Result<()> {
    // SAFETY: integer-only prctl.
    check_int(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })
}

/// `prctl(PR_GET_NO_NEW_PRIVS)`.
pub fn no_new_privs() -> io::Result<bool> {
    // SAFETY: integer-only prctl.
    let rc = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) };
    check(rc as libc::c_long).map(|v| v == 1)
}

/// `prctl(PR_SET_SECUREBITS, bits)`.
pub fn set_securebits(bits: libc::c_ulong) -> io::Result<()> {
    // SAFETY: integer-only prctl.
    check_int(unsafe { libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) })
}

/// `prctl(PR_CAPBSET_DROP, cap)`. `Err(EINVAL)` means the capability does not exist.
pub fn drop_bounding_capability(cap: u32) -> io::Result<()> {
    // SAFETY: integer-only prctl.
    check_int(unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) })
}

/// `prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)`.
pub fn clear_ambient_capabilities() -> io::Result<()> {
    // SAFETY: integer-only prctl.
    check_int(unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0, 0, 0) })
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// `capset` with empty effective, permitted and inheritable sets.
pub fn clear_capabilities() -> io::Result<()> {
    let mut header = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    let data = [CapData::default(); 2];
    // SAFETY: header and data are valid, correctly laid out (v3 uses two CapData) and live
    // for the duration of the call; the kernel only reads data.
    check(unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) }).map(drop)
}

/// `capget`: (effective, permitted) as 64-bit masks.
pub fn capabilities() -> io::Result<(u64, u64)> {
    let mut header = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    let mut data = [CapData::default(); 2];
    // SAFETY: header and data point to writable, correctly sized v3 structures.
    check(unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) })?;
    let join = |lo: u32, hi: u32| (lo as u64) | ((hi as u64) << 32);
    Ok((join(data[0].effective, data[1].effective), join(data[0].permitted, data[1].permitted)))
}

/// `setgroups(0, NULL)`.
pub fn clear_supplementary_groups() -> io::Result<()> {
    // SAFETY: a zero-length list with a null pointer is the documented way to clear groups.
    check_int(unsafe { libc::setgroups(0, std::ptr::null()) })
}

/// `setresgid(gid, gid, gid)`.
pub fn set_all_gids(gid: u32) -> io::Result<()> {
    // SAFETY: integer-only system call.
    check_int(unsafe { libc::setresgid(gid, gid, gid) })
}

/// `setresuid(uid, uid, uid)`.
pub fn set_all_uids(uid: u32) -> io::Result<()> {
    // SAFETY: integer-only system call.
    check_int(unsafe { libc::setresuid(uid, uid, uid) })
}

/// `getresuid` and `getresgid`: ((ruid, euid, suid), (rgid, egid, sgid)).
pub fn ids() -> io::Result<([u32; 3], [u32; 3])> {
    let (mut u, mut g) = ([0u32; 3], [0u32; 3]);
    // SAFETY: each pointer refers to a distinct, writable u32 that outlives the call.
    check_int(unsafe { libc::getresuid(&mut u[0], &mut u[1], &mut u[2]) })?;
    // SAFETY: as above.
    check_int(unsafe { libc::getresgid(&mut g[0], &mut g[1], &mut g[2]) })?;
    Ok((u, g))
}

/// `setpriority(PRIO_PROCESS, 0, nice)`: the calling thread's nice value.
pub fn set_nice(nice: i32) -> io::Result<()> {
    // SAFETY: integer-only call on the calling thread.
    check_int(unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) })
}

/// `geteuid()`.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and takes no arguments.
    unsafe { libc::geteuid() }
}

/// `unshare(flags)`.
pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: integer-only system call.
    check_int(unsafe { libc::unshare(flags) })
}

/// `mount(NULL or source, target, NULL, flags, NULL)` for propagation changes.
pub fn mount(
    source: Option<&str>,
    target: &str,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let c = |s: &str| std::ffi::CString::new(s).map_err(|_| io::Error::other("NUL in mount argument"));
    let (source, target) = (source.map(c).transpose()?, c(target)?);
    let (fstype, data) = (fstype.map(c).transpose()?, data.map(c).transpose()?);
    let ptr = |o: &Option<std::ffi::CString>| o.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: every pointer is null or a valid NUL-terminated string alive for the call.
    check_int(unsafe { libc::mount(ptr(&source), target.as_ptr(), ptr(&fstype), flags, ptr(&data).cast()) })
}

/// `mount("tmpfs", target, fstype, flags, options)`.
pub fn mount_at(target: &std::ffi::CStr, fstype: &str, flags: libc::c_ulong, options: &str) -> io::Result<()> {
    let c = |s: &str| std::ffi::CString::new(s).map_err(|_| io::Error::other("NUL in mount argument"));
    let (source, fstype, options) = (c("rsandbox")?, c(fstype)?, c(options)?);
    // SAFETY: all pointers are valid NUL-terminated strings alive for the call.
    check_int(unsafe { libc::mount(source.as_ptr(), target.as_ptr(), fstype.as_ptr(), flags, options.as_ptr().cast()) })
}

/// `mount(source, target, NULL, MS_BIND | MS_REC, NULL)`.
pub fn bind_mount(source: &std::ffi::CStr, target: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: both are valid NUL-terminated strings alive for the call.
    check_int(unsafe {
        libc::mount(source.as_ptr(), target.as_ptr(), std::ptr::null(), libc::MS_BIND | libc::MS_REC, std::ptr::null())
    })
}

/// `mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | flags, NULL)`.
pub fn remount_bind(target: &std::ffi::CStr, flags: libc::c_ulong) -> io::Result<()> {
    // SAFETY: a valid NUL-terminated target; null source, type and data are allowed.
    check_int(unsafe {
        libc::mount(
            std::ptr::null(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_REMOUNT | libc::MS_BIND | flags,
            std::ptr::null(),
        )
    })
}

/// The per-mount flags of the mount holding `path` (`statvfs` `f_flag`), as `MS_*`.
pub fn mount_flags(path: &std::ffi::CStr) -> io::Result<libc::c_ulong> {
    // SAFETY: a zeroed statvfs is a valid out-parameter.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid path and a writable statvfs.
    check_int(unsafe { libc::statvfs(path.as_ptr(), &mut st) })?;
    // ST_* and MS_* share these bit values.
    let keep = libc::MS_RDONLY
        | libc::MS_NOSUID
        | libc::MS_NODEV
        | libc::MS_NOEXEC
        | libc::MS_NOATIME
        | libc::MS_NODIRATIME
        | libc::MS_RELATIME;
    Ok(st.f_flag & keep)
}

/// `pivot_root(new_root, put_old)`.
pub fn pivot_root(new_root: &std::ffi::CStr, put_old: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: two valid NUL-terminated paths alive for the call.
    check(unsafe { libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) }).map(drop)
}

/// `umount2(target, MNT_DETACH)`.
pub fn umount_detach(target: &str) -> io::Result<()> {
    let c = std::ffi::CString::new(target).map_err(|_| io::Error::other("NUL in path"))?;
    // SAFETY: a valid NUL-terminated path.
    check_int(unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) })
}

/// `close_range(first, ~0, 0)`: close every fd from `first` up.
pub fn close_fds_from(first: RawFd) -> io::Result<()> {
    // SAFETY: integer-only system call; closing fds we no longer use is the point.
    check(unsafe { libc::syscall(libc::SYS_close_range, first as libc::c_uint, libc::c_uint::MAX, 0) }).map(drop)
}

/// `setrlimit(resource, {soft, hard})`.
pub fn set_rlimit(resource: libc::__rlimit_resource_t, soft: u64, hard: u64) -> io::Result<()> {
    let limit = libc::rlimit { rlim_cur: soft, rlim_max: hard };
    // SAFETY: `limit` is a valid rlimit that lives across the call; the kernel only reads it.
    check_int(unsafe { libc::setrlimit(resource, &limit) })
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`: the kernel's ABI
/// version, or 0 when Landlock is missing or disabled.
pub fn landlock_abi_version() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer and size 0 the kernel reads no memory.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if rc < 0 {
        0
    } else {
        rc as i32
    }
}

/// `prctl(PR_GET_SECCOMP)`: whether the kernel has seccomp at all (EINVAL when not built in).
pub fn seccomp_available() -> bool {
    // SAFETY: integer-only prctl.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}

/// `close(fd)`; errors are meaningless for an fd we are only giving up.
pub fn close(fd: RawFd) {
    // SAFETY: closing an fd this process owns and no longer uses.
    unsafe { libc::close(fd) };
}

/// `write` that retries on EINTR; async-signal-safe.
pub fn write_all_raw(fd: RawFd, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: the pointer and length describe a live slice.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

/// `_exit(code)`: leave without running atexit handlers or flushing stdio.
pub fn exit_immediately(code: libc::c_int) -> ! {
    // SAFETY: _exit never returns and is async-signal-safe.
    unsafe { libc::_exit(code) }
}

/// `access(path, W_OK)`.
pub fn access_writable(path: &str) -> bool {
    let Ok(c) = std::ffi::CString::new(path) else { return false };
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// `memfd_create(name, MFD_CLOEXEC)`: an anonymous file (libseccomp's reference program
/// is exported into one and read back, in the tests).
#[cfg(test)]
pub fn memfd(name: &std::ffi::CStr) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: a valid NUL-terminated name alive for the call; integer flags.
    let fd = check_int_fd(unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) })?;
    // SAFETY: the kernel just gave us this fd and nothing else owns it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
fn check_int_fd(rc: libc::c_int) -> io::Result<RawFd> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}
