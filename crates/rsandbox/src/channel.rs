//! The supervisor <-> zygote channel: a `SOCK_SEQPACKET` socketpair, one JSON message per
//! packet, with fds passed as `SCM_RIGHTS`. Packets keep message boundaries, so a reader
//! never sees half a message, and the fds arrive with the message they belong to.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Largest message on this channel (policies and events are small).
pub const MAX_MESSAGE: usize = 256 << 10;
/// Most fds one message carries.
pub const MAX_FDS: usize = 8;

/// One end of a seqpacket socketpair.
#[derive(Debug)]
pub struct Channel {
    fd: OwnedFd,
}

impl Channel {
    /// A connected pair, both ends close-on-exec.
    pub fn pair() -> io::Result<(Channel, Channel)> {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors the kernel writes.
        let rc = unsafe {
            libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr())
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both fds were just created and are owned by nobody else.
        Ok(unsafe { (Channel { fd: OwnedFd::from_raw_fd(fds[0]) }, Channel { fd: OwnedFd::from_raw_fd(fds[1]) }) })
    }

    /// Wrap an inherited fd.
    pub fn from_fd(fd: OwnedFd) -> Channel {
        Channel { fd }
    }

    /// Send one message with `fds` attached.
    pub fn send(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        if bytes.len() > MAX_MESSAGE || fds.len() > MAX_FDS {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "message too large"));
        }
        let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
        lockdown::fdpass::send_with_fds(self.fd.as_raw_fd(), bytes, &raw)
    }

    /// Receive one message and the fds that came with it. `Ok(None)` at end of stream.
    pub fn recv(&self) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
        let mut bytes = vec![0u8; MAX_MESSAGE];
        let mut iov = libc::iovec { iov_base: bytes.as_mut_ptr().cast(), iov_len: bytes.len() };
        // SAFETY: pure computation.
        let space = unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) } as usize;
        let mut control = vec![0u8; space];
        // SAFETY: a zeroed msghdr is valid; fields below point at live buffers.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        let n = loop {
            // SAFETY: `msg` points at writable buffers of the stated sizes.
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
            if n >= 0 {
                break n as usize;
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        };
        let mut fds = Vec::new();
        // SAFETY: walking the control buffer the kernel filled, with the libc macros that
        // bound each header by msg_controllen; each SCM_RIGHTS payload is an fd array whose
        // fds now belong to us.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                    let count = ((*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                    for i in 0..count {
                        fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "message or fds truncated"));
        }
        if n == 0 && fds.is_empty() {
            return Ok(None);
        }
        bytes.truncate(n);
        Ok(Some((bytes, fds)))
    }
}

impl AsFd for Channel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn messages_keep_boundaries_and_carry_fds() {
        let (a, b) = Channel::pair().unwrap();
        let (mut r, mut w) = std::os::unix::net::UnixStream::pair().unwrap();
        a.send(b"first", &[w.as_fd()]).unwrap();
        a.send(b"second", &[]).unwrap();
        let (msg, fds) = b.recv().unwrap().unwrap();
        assert_eq!(msg, b"first");
        assert_eq!(fds.len(), 1);
        let mut passed = std::fs::File::from(fds.into_iter().next().unwrap());
        passed.write_all(b"via fd").unwrap();
        drop(passed);
        w.write_all(b"!").unwrap();
        drop(w);
        let mut got = String::new();
        r.read_to_string(&mut got).unwrap();
        assert_eq!(got, "via fd!");
        assert_eq!(b.recv().unwrap().unwrap().0, b"second");
        drop(a);
        assert!(b.recv().unwrap().is_none());
    }
}
