//! A `SOCK_SEQPACKET` socketpair: one message per packet, fds attached. Packets keep
//! message boundaries, so a reader never sees half a message, and the fds arrive with
//! the message they belong to.

use crate::fdpass;
use rustix::net::{socketpair, AddressFamily, RecvFlags, SocketFlags, SocketType};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Largest message on a seqpacket channel (policies and events are small).
pub const MAX_MESSAGE: usize = 256 << 10;

/// One end of a seqpacket socketpair.
#[derive(Debug)]
pub struct Channel {
    fd: OwnedFd,
}

impl Channel {
    /// A connected pair, both ends close-on-exec.
    pub fn pair() -> io::Result<(Channel, Channel)> {
        let (a, b) = socketpair(AddressFamily::UNIX, SocketType::SEQPACKET, SocketFlags::CLOEXEC, None)?;
        Ok((Channel { fd: a }, Channel { fd: b }))
    }

    /// Wrap an inherited fd.
    pub fn from_fd(fd: OwnedFd) -> Channel {
        Channel { fd }
    }

    /// Send one message with `fds` attached.
    pub fn send(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        if bytes.len() > MAX_MESSAGE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("message of {} bytes exceeds {MAX_MESSAGE}", bytes.len()),
            ));
        }
        fdpass::send(self.fd.as_fd(), bytes, fds)
    }

    /// Receive one message and the fds that came with it. `Ok(None)` at end of stream.
    pub fn recv(&self) -> io::Result<Option<Message>> {
        // A buffer of the next message's size, not of MAX_MESSAGE: zeroing 256 KiB per
        // message cost the zygote 64 copy-on-write faults per spawn (its heap is shared
        // with every child it has forked), a third of its own CPU. Larger than allowed:
        // cut at MAX_MESSAGE, which `fdpass::recv` reports as truncated.
        let size = self.next_message_size()?.min(MAX_MESSAGE);
        let mut bytes = vec![0u8; size];
        let fdpass::Message { bytes: n, fds, fds_lost } = fdpass::recv(&self.fd, &mut bytes)?;
        if n == 0 && fds.is_empty() && !fds_lost {
            return Ok(None);
        }
        bytes.truncate(n);
        Ok(Some(Message { bytes, fds, fds_lost }))
    }
}

/// One message of a [`Channel`].
#[derive(Debug)]
pub struct Message {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// The fds that came with it (close-on-exec).
    pub fds: Vec<OwnedFd>,
    /// The kernel could not install (some of) its fds: this process had no descriptor
    /// free ([`fdpass::Message::fds_lost`]). Each reader decides what that costs: the
    /// message, never the channel.
    pub fds_lost: bool,
}

impl Channel {
    /// The size of the next message, waiting for one, without taking it (nor its fds:
    /// no control buffer is passed). 0 at end of stream.
    fn next_message_size(&self) -> io::Result<usize> {
        loop {
            // With TRUNC the kernel returns a packet's whole length, however small the
            // buffer (here none).
            match rustix::net::recv(&self.fd, &mut [0u8; 0][..], RecvFlags::PEEK | RecvFlags::TRUNC) {
                Ok((_, length)) => return Ok(length),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl AsFd for Channel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl From<Channel> for OwnedFd {
    fn from(channel: Channel) -> OwnedFd {
        channel.fd
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
        let Message { bytes: msg, fds, .. } = b.recv().unwrap().unwrap();
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
        assert_eq!(b.recv().unwrap().unwrap().bytes, b"second");
        drop(a);
        assert!(b.recv().unwrap().is_none());
    }

    #[test]
    fn oversized_messages_and_too_many_fds_are_refused() {
        let (a, _b) = Channel::pair().unwrap();
        assert_eq!(a.send(&vec![0; MAX_MESSAGE + 1], &[]).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        let many: Vec<_> = (0..=fdpass::MAX_FDS).map(|_| a.as_fd()).collect();
        assert_eq!(a.send(b"x", &many).unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }

    /// The receiver sizes its buffer to each message: a large one arrives whole after a
    /// small one, and each with its own fds. (One over MAX_MESSAGE cannot be sent on an
    /// ordinary socket: its send buffer, ~208 KiB, is smaller.)
    #[test]
    fn each_message_arrives_whole_with_its_fds() {
        let (a, b) = Channel::pair().unwrap();
        a.send(b"small", &[]).unwrap();
        let large: Vec<u8> = (0..150 << 10).map(|i| i as u8).collect();
        a.send(&large, &[a.as_fd()]).unwrap();
        a.send(b"", &[a.as_fd()]).unwrap();
        let Message { bytes, fds, .. } = b.recv().unwrap().unwrap();
        assert_eq!((bytes, fds.len()), (b"small".to_vec(), 0));
        let Message { bytes, fds, .. } = b.recv().unwrap().unwrap();
        assert_eq!((bytes, fds.len()), (large, 1));
        let Message { bytes, fds, .. } = b.recv().unwrap().unwrap();
        assert_eq!((bytes.len(), fds.len()), (0, 1));
    }
}
