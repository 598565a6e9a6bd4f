//! File descriptors over a unix socket (`SCM_RIGHTS`), both ways, through rustix's
//! ancillary-message buffers rather than hand-written `cmsg` arithmetic. The one
//! implementation: the seccomp layer sends its listener with it, and the supervisor,
//! zygote and child channels (crate `rsandbox-wire`) use it too. [`send`] allocates
//! nothing, so a freshly forked child may call it.

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Most fds one message carries.
pub const MAX_FDS: usize = 8;

/// Send `bytes` as one message with `fds` attached (retrying on `EINTR`).
pub fn send(socket: BorrowedFd<'_>, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} fds exceed {MAX_FDS}", fds.len())));
    }
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("fd control buffer too small"));
    }
    loop {
        match sendmsg(socket, &[IoSlice::new(bytes)], &mut control, SendFlags::NOSIGNAL) {
            Ok(n) if n == bytes.len() => return Ok(()),
            Ok(n) => {
                return Err(io::Error::new(io::ErrorKind::WriteZero, format!("sent {n} of {} bytes", bytes.len())))
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// One message as [`recv`] received it.
#[derive(Debug)]
pub struct Message {
    /// How many bytes of the buffer it filled (0 with no fds: the end of the stream).
    pub bytes: usize,
    /// The fds that came with it (close-on-exec).
    pub fds: Vec<OwnedFd>,
    /// The message came whole, but the kernel could not give this process (some of) its
    /// fds: the process had no descriptor free (its limit, or the system's table; the
    /// kernel does not say which), and closed them. The receiver's capacity, not the
    /// sender's mistake: the message can still be answered (see [`fds_lost`]).
    pub fds_lost: bool,
}

/// Receive one message into `buffer` and the fds that came with it. A message or fd
/// list larger than the buffers is an error, never silently cut; fds this process had
/// no room for are [`Message::fds_lost`].
pub fn recv(socket: impl AsFd, buffer: &mut [u8]) -> io::Result<Message> {
    let mut fds = Vec::new();
    match recv_each_fd(socket, buffer, |fd| fds.push(fd))? {
        Received::Whole(bytes) => Ok(Message { bytes, fds, fds_lost: false }),
        Received::FdsLost(bytes) => Ok(Message { bytes, fds, fds_lost: true }),
        Received::Cut => Err(io::Error::new(io::ErrorKind::InvalidData, "message or fds truncated")),
    }
}

/// The error for fds the kernel could not install ([`Message::fds_lost`]): `EMFILE`,
/// the likelier of the two causes (the process's own limit), which callers tell as the
/// receiver's capacity.
pub fn fds_lost() -> io::Error {
    rustix::io::Errno::MFILE.into()
}

/// [`recv`] for a message of at most one fd, allocating nothing: for a parent whose
/// child still runs in its memory (see `command::spawn`). More fds than one are closed
/// and make it an error.
pub fn recv_one(socket: impl AsFd, buffer: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    let (mut first, mut more) = (None, false);
    let received = recv_each_fd(socket, buffer, |fd| match first {
        None => first = Some(fd),
        Some(_) => more = true, // `fd` is closed here
    })?;
    match received {
        // Plain kinds, not messages: a message would be allocated.
        Received::Whole(_) if more => Err(io::ErrorKind::InvalidData.into()),
        Received::Whole(bytes) => Ok((bytes, first)),
        Received::FdsLost(_) => Err(fds_lost()),
        Received::Cut => Err(io::ErrorKind::InvalidData.into()),
    }
}

/// A message as [`recv_each_fd`] read it.
enum Received {
    /// All of it: this many bytes.
    Whole(usize),
    /// All of its bytes (this many), but not all of its fds: see [`Message::fds_lost`].
    FdsLost(usize),
    /// Longer than the buffers (bytes or fds).
    Cut,
}

/// Receive one message into `buffer`, handing each fd that came with it to `take`
/// before any check (so that on error they are closed, not leaked). Allocates nothing.
fn recv_each_fd(socket: impl AsFd, buffer: &mut [u8], mut take: impl FnMut(OwnedFd)) -> io::Result<Received> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = loop {
        match recvmsg(&socket, &mut [IoSliceMut::new(buffer)], &mut control, RecvFlags::CMSG_CLOEXEC) {
            Ok(r) => break r,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    let mut count = 0;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            rights.for_each(|fd| {
                count += 1;
                take(fd)
            });
        }
    }
    // The control buffer holds MAX_FDS: fewer fds than that with the control part cut
    // means the kernel failed to install one (it stops at the first, sets MSG_CTRUNC and
    // closes the rest), which only a lack of descriptors does; as many means the sender
    // sent more than the buffer holds.
    if received.flags.contains(ReturnFlags::TRUNC) {
        return Ok(Received::Cut);
    }
    if received.flags.contains(ReturnFlags::CTRUNC) {
        return Ok(if count < MAX_FDS { Received::FdsLost(received.bytes) } else { Received::Cut });
    }
    Ok(Received::Whole(received.bytes))
}
