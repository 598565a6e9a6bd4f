//! Every raw system call the crate makes, each behind a small safe wrapper.
//!
//! Wrappers return `io::Result` and never interpret the error: callers attach
//! the step they were in. rustix makes the call wherever it has it (a raw system call,
//! async-signal-safe, so usable between `fork` and `exec`); `libc` remains where rustix
//! lacks the call or does something else, each saying why.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

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
    Ok(rustix::process::setpgid(None, None)?)
}

/// `prctl(PR_SET_PDEATHSIG, sig)`.
pub fn set_parent_death_signal(signal: libc::c_int) -> io::Result<()> {
    let signal = rustix::process::Signal::from_named_raw(signal).ok_or(rustix::io::Errno::INVAL)?;
    Ok(rustix::process::set_parent_process_death_signal(Some(signal))?)
}

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)`: orphaned descendants are reparented to us.
pub fn set_child_subreaper() -> io::Result<()> {
    // rustix passes the pid as the attribute's value: any non-zero one sets it.
    Ok(rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?)
}

/// `prctl(PR_SET_DUMPABLE, 1)`: /proc/self belongs to the process's own uid again.
pub fn set_dumpable() -> io::Result<()> {
    Ok(rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::Dumpable)?)
}

/// `prctl(PR_SET_DUMPABLE, 0)`: /proc/self becomes root-owned and ptrace by peers is refused.
pub fn set_not_dumpable() -> io::Result<()> {
    Ok(rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?)
}

/// `prctl(PR_SET_NO_NEW_PRIVS, 1)`.
pub fn set_no_new_privs() -> io::Result<()> {
    Ok(rustix::thread::set_no_new_privs(true)?)
}

/// `prctl(PR_GET_NO_NEW_PRIVS)`.
pub fn no_new_privs() -> io::Result<bool> {
    Ok(rustix::thread::no_new_privs()?)
}

/// `prctl(PR_SET_SECUREBITS, bits)`.
pub fn set_securebits(bits: libc::c_ulong) -> io::Result<()> {
    let bits = rustix::thread::CapabilitiesSecureBits::from_bits_retain(bits as libc::c_uint);
    Ok(rustix::thread::set_capabilities_secure_bits(bits)?)
}

/// `prctl(PR_CAPBSET_DROP, cap)`. `Err(EINVAL)` means the capability does not exist.
pub fn drop_bounding_capability(cap: u32) -> io::Result<()> {
    // A one-bit set names the capability by number, also one newer than rustix's list.
    let one = rustix::thread::CapabilitySet::from_bits_retain(1u64.checked_shl(cap).ok_or(rustix::io::Errno::INVAL)?);
    Ok(rustix::thread::remove_capability_from_bounding_set(one)?)
}

/// `prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)`.
pub fn clear_ambient_capabilities() -> io::Result<()> {
    Ok(rustix::thread::clear_ambient_capability_set()?)
}

/// `capset` with empty effective, permitted and inheritable sets.
pub fn clear_capabilities() -> io::Result<()> {
    let empty = rustix::thread::CapabilitySet::empty();
    let sets = rustix::thread::CapabilitySets { effective: empty, permitted: empty, inheritable: empty };
    Ok(rustix::thread::set_capabilities(None, sets)?)
}

/// `capget`: (effective, permitted) as 64-bit masks.
pub fn capabilities() -> io::Result<(u64, u64)> {
    let sets = rustix::thread::capabilities(None)?;
    Ok((sets.effective.bits(), sets.permitted.bits()))
}

// The identity calls stay libc's: glibc applies `setgroups`/`setresgid`/`setresuid` to
// every thread of the process, rustix's `set_thread_*` only to the calling thread.

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
    // libc: rustix has no getresuid/getresgid.
    let (mut u, mut g) = ([0u32; 3], [0u32; 3]);
    // SAFETY: each pointer refers to a distinct, writable u32 that outlives the call.
    check_int(unsafe { libc::getresuid(&mut u[0], &mut u[1], &mut u[2]) })?;
    // SAFETY: as above.
    check_int(unsafe { libc::getresgid(&mut g[0], &mut g[1], &mut g[2]) })?;
    Ok((u, g))
}

/// `setpriority(PRIO_PROCESS, 0, nice)`: the calling thread's nice value.
pub fn set_nice(nice: i32) -> io::Result<()> {
    Ok(rustix::process::setpriority_process(None, nice)?)
}

/// `geteuid()`.
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// `unshare(flags)`.
pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    let flags = rustix::thread::UnshareFlags::from_bits_retain(flags as u32);
    // SAFETY: the callers pass namespace flags only, never CLONE_FILES (the one flag that
    // could leave another thread with fds of a table it no longer shares), and the
    // lockdown runs single-threaded anyway.
    Ok(unsafe { rustix::thread::unshare_unsafe(flags) }?)
}

/// `mount(NULL or source, target, NULL, flags, NULL)` for propagation changes.
pub fn mount(
    source: Option<&str>,
    target: &str,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    // libc: rustix's generic `mount` always passes a source and a type, and these calls
    // (a propagation change, a remount) pass none.
    let c = |s: &str| std::ffi::CString::new(s).map_err(|_| io::Error::other("NUL in mount argument"));
    let (source, target) = (source.map(c).transpose()?, c(target)?);
    let (fstype, data) = (fstype.map(c).transpose()?, data.map(c).transpose()?);
    let ptr = |o: &Option<std::ffi::CString>| o.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: every pointer is null or a valid NUL-terminated string alive for the call.
    check_int(unsafe { libc::mount(ptr(&source), target.as_ptr(), ptr(&fstype), flags, ptr(&data).cast()) })
}

/// `mount("tmpfs", target, fstype, flags, options)`.
pub fn mount_at(target: &std::ffi::CStr, fstype: &str, flags: libc::c_ulong, options: &str) -> io::Result<()> {
    let options = std::ffi::CString::new(options).map_err(|_| io::Error::other("NUL in mount argument"))?;
    let flags = rustix::mount::MountFlags::from_bits_retain(flags as _);
    Ok(rustix::mount::mount(c"rsandbox", target, fstype, flags, Some(options.as_c_str()))?)
}

/// `mount(source, target, NULL, MS_BIND | MS_REC, NULL)`.
pub fn bind_mount(source: &std::ffi::CStr, target: &std::ffi::CStr) -> io::Result<()> {
    Ok(rustix::mount::mount_bind_recursive(source, target)?)
}

/// `mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | flags, NULL)`.
pub fn remount_bind(target: &std::ffi::CStr, flags: libc::c_ulong) -> io::Result<()> {
    // libc: as in `mount`, no source, type or data (rustix's `mount_remount` passes data).
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
    let st = rustix::fs::statvfs(path)?;
    // ST_* and MS_* share these bit values.
    let keep = libc::MS_RDONLY
        | libc::MS_NOSUID
        | libc::MS_NODEV
        | libc::MS_NOEXEC
        | libc::MS_NOATIME
        | libc::MS_NODIRATIME
        | libc::MS_RELATIME;
    Ok(st.f_flag.bits() as libc::c_ulong & keep)
}

/// `pivot_root(new_root, put_old)`.
pub fn pivot_root(new_root: &std::ffi::CStr, put_old: &std::ffi::CStr) -> io::Result<()> {
    Ok(rustix::process::pivot_root(new_root, put_old)?)
}

/// `mount(source, target, NULL, MS_MOVE, NULL)`: move the mount at `source` to `target`.
pub fn move_mount(source: &std::ffi::CStr, target: &std::ffi::CStr) -> io::Result<()> {
    Ok(rustix::mount::mount_move(source, target)?)
}

/// `umount2(target, MNT_DETACH)`.
pub fn umount_detach(target: &str) -> io::Result<()> {
    Ok(rustix::mount::unmount(target, rustix::mount::UnmountFlags::DETACH)?)
}

/// `close_range(first, ~0, 0)`: close every fd from `first` up.
pub fn close_fds_from(first: RawFd) -> io::Result<()> {
    // libc: rustix has no close_range.
    // SAFETY: integer-only system call; closing fds we no longer use is the point.
    check(unsafe { libc::syscall(libc::SYS_close_range, first as libc::c_uint, libc::c_uint::MAX, 0) }).map(drop)
}

/// `close_range(first, last, 0)`: close the fds from `first` to `last` (none when
/// `last < first`).
pub fn close_fd_range(first: RawFd, last: RawFd) -> io::Result<()> {
    if last < first {
        return Ok(());
    }
    // libc: rustix has no close_range.
    // SAFETY: integer-only system call; closing fds we no longer use is the point.
    check(unsafe { libc::syscall(libc::SYS_close_range, first as libc::c_uint, last as libc::c_uint, 0) }).map(drop)
}

/// `setrlimit(resource, {soft, hard})`.
pub fn set_rlimit(resource: rustix::process::Resource, soft: u64, hard: u64) -> io::Result<()> {
    Ok(rustix::process::setrlimit(resource, rustix::process::Rlimit { current: Some(soft), maximum: Some(hard) })?)
}

/// `landlock_add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH, {access, parent}, 0)`: access
/// `access` (the kernel's `LANDLOCK_ACCESS_FS_*` bits) beneath `parent`.
pub fn landlock_add_path_rule(ruleset: BorrowedFd<'_>, parent: BorrowedFd<'_>, access: u64) -> io::Result<()> {
    // The kernel's `struct landlock_path_beneath_attr`, which it declares packed.
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    let attr = PathBeneathAttr { allowed_access: access, parent_fd: parent.as_raw_fd() };
    // libc: rustix has no Landlock calls.
    // SAFETY: `attr` is a valid `landlock_path_beneath_attr` that outlives the call, which
    // only reads it; both fds are borrowed, so open for the call's length.
    check(unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0 as libc::c_uint,
        )
    })
    .map(drop)
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`: the kernel's ABI
/// version, or 0 when Landlock is missing or disabled.
pub fn landlock_abi_version() -> i32 {
    // libc: rustix has no Landlock calls (the `landlock` crate makes the others).
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
    rustix::thread::secure_computing_mode().is_ok()
}

/// `close(fd)`; errors are meaningless for an fd we are only giving up.
pub fn close(fd: RawFd) {
    // SAFETY: closing an fd this process owns and no longer uses.
    unsafe { rustix::io::close(fd) };
}

/// `write` that retries on EINTR; async-signal-safe.
pub fn write_all_raw(fd: RawFd, mut bytes: &[u8]) -> io::Result<()> {
    // SAFETY: the caller passes an fd that stays open for this call.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// `_exit(code)`: leave without running atexit handlers or flushing stdio.
pub fn exit_immediately(code: libc::c_int) -> ! {
    // libc: rustix ends a process only in its `runtime` feature (for libc replacements).
    // SAFETY: _exit never returns and is async-signal-safe.
    unsafe { libc::_exit(code) }
}

/// `access(path, W_OK)`.
pub fn access_writable(path: &str) -> bool {
    rustix::fs::access(path, rustix::fs::Access::WRITE_OK).is_ok()
}

/// `memfd_create(name, MFD_CLOEXEC)`: an anonymous file (libseccomp's reference program
/// is exported into one and read back, in the tests).
#[cfg(test)]
pub fn memfd(name: &std::ffi::CStr) -> io::Result<std::os::fd::OwnedFd> {
    Ok(rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC)?)
}

/// Set `IFF_UP` on `lo` (`SIOCGIFFLAGS`, `SIOCSIFFLAGS` on a throwaway `AF_INET`
/// datagram socket, closed before returning). Needs `CAP_NET_ADMIN` in the network
/// namespace.
pub fn bring_loopback_up() -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let socket = rustix::net::socket_with(
        rustix::net::AddressFamily::INET,
        rustix::net::SocketType::DGRAM,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )?;
    // libc: rustix has no interface-flag ioctls.
    // SAFETY: a zeroed ifreq is valid; the name fits (3 bytes and a NUL of IFNAMSIZ).
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (to, from) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *to = *from as libc::c_char;
    }
    // SAFETY: `request` is a valid ifreq for both calls, which read and write only it.
    unsafe {
        check_int(libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut request))?;
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        check_int(libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS as _, &request))
    }
}

/// A listening TCP socket on `127.0.0.1` and a port the kernel picks (close-on-exec).
/// On failure, the call that failed.
pub fn tcp_listener_on_loopback(backlog: i32) -> Result<std::os::fd::OwnedFd, (&'static str, io::Error)> {
    use rustix::net::{AddressFamily, SocketAddrV4, SocketFlags, SocketType};
    let socket = rustix::net::socket_with(AddressFamily::INET, SocketType::STREAM, SocketFlags::CLOEXEC, None)
        .map_err(|e| ("socket", e.into()))?;
    rustix::net::bind(&socket, &SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 0)).map_err(|e| ("bind", e.into()))?;
    rustix::net::listen(&socket, backlog).map_err(|e| ("listen", e.into()))?;
    Ok(socket)
}

/// The local port of a bound IPv4 socket (`getsockname`).
pub fn local_port(socket: std::os::fd::BorrowedFd<'_>) -> io::Result<u16> {
    let address = rustix::net::getsockname(socket)?;
    let v4 = rustix::net::SocketAddrV4::try_from(address).map_err(|_| io::Error::other("not an IPv4 socket"))?;
    Ok(v4.port())
}
