//! The child's stdout and stderr as the supervisor reads them: non-blocking pipe ends,
//! read into memory up to the room the output limit leaves.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd};

/// Bytes read from one fd per round of the supervisor's loop: however many processes
/// write, the loop comes back to its deadline and its other fds after this much.
pub(crate) const READ_BUDGET: usize = 1 << 20;

/// One read's room, left uninitialised: a zeroed 64 KiB buffer cost a memset per fd per
/// round of the loop whether anything was there or not (three per round, a few percent
/// of the supervisor's CPU under load).
pub(crate) type Chunk = [MaybeUninit<u8>; 65536];

/// An empty [`Chunk`].
pub(crate) fn chunk() -> Chunk {
    [MaybeUninit::uninit(); 65536]
}

/// A close-on-exec pipe: (read end, write end).
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    let flags = rustix::fs::fcntl_getfl(fd)?;
    Ok(rustix::fs::fcntl_setfl(fd, flags | rustix::fs::OFlags::NONBLOCK)?)
}

/// A readable pipe end and what came out of it since the last `take`.
pub(crate) struct Stream {
    /// `None` once the write end is closed everywhere (or reading failed).
    pub(crate) fd: Option<OwnedFd>,
    pub(crate) data: Vec<u8>,
}

impl Stream {
    pub(crate) fn new(fd: OwnedFd) -> io::Result<Stream> {
        set_nonblocking(&fd)?;
        Ok(Stream { fd: Some(fd), data: Vec::new() })
    }

    /// The fd to poll, or -1 (ignored by poll) once closed.
    pub(crate) fn poll_fd(&self) -> i32 {
        self.fd.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    /// Read what is available, at most [`READ_BUDGET`] bytes; keeps at most `room` more
    /// bytes. Returns the bytes read, kept or not, so that the caller sees output beyond
    /// the limit.
    pub(crate) fn pump(&mut self, room: usize) -> usize {
        let Some(fd) = &self.fd else { return 0 };
        let mut buf = chunk();
        let mut total = 0;
        while total < READ_BUDGET {
            let read = rustix::io::read(fd, &mut buf).map(|(filled, _)| &*filled);
            if let Ok(bytes @ [_, ..]) = read {
                let keep = bytes.len().min(room.saturating_sub(total));
                self.data.extend_from_slice(&bytes[..keep]);
                total += bytes.len();
                continue;
            }
            // End of file, or an error other than "nothing yet": closed.
            if read != Err(rustix::io::Errno::AGAIN) {
                self.fd = None;
            }
            return total;
        }
        total
    }
}

/// stdout and stderr together, counted against one output limit.
pub(crate) struct Output {
    pub(crate) stdout: Stream,
    pub(crate) stderr: Stream,
}

impl Output {
    /// Bytes kept so far.
    pub(crate) fn kept(&self) -> usize {
        self.stdout.data.len() + self.stderr.data.len()
    }

    /// Pump both pipes; `already` counts other output (result frames) against `max`.
    /// Returns the total seen, which may exceed `max`.
    pub(crate) fn pump(&mut self, already: usize, max: usize) -> usize {
        let mut used = self.kept() + already;
        used += self.stdout.pump(max.saturating_sub(used));
        used += self.stderr.pump(max.saturating_sub(used));
        used
    }

    /// Both write ends are closed.
    pub(crate) fn closed(&self) -> bool {
        self.stdout.fd.is_none() && self.stderr.fd.is_none()
    }

    pub(crate) fn clear(&mut self) {
        self.stdout.data.clear();
        self.stderr.data.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn output_beyond_the_room_is_counted_not_kept() {
        let (r, w) = pipe().unwrap();
        let mut stream = Stream::new(r).unwrap();
        let mut writer = std::fs::File::from(w);
        writer.write_all(b"0123456789").unwrap();
        assert_eq!(stream.pump(4), 10);
        assert_eq!(stream.data, b"0123");
        drop(writer);
        assert_eq!(stream.pump(4), 0);
        assert!(stream.fd.is_none());
    }

    #[test]
    fn a_writer_that_never_stops_cannot_keep_the_reader_in_one_round() {
        let (r, w) = pipe().unwrap();
        let mut stream = Stream::new(r).unwrap();
        let writer = std::thread::spawn(move || {
            let mut writer = std::fs::File::from(w);
            let chunk = vec![b'x'; 65536];
            // Ends when the reader's end is closed (EPIPE).
            while writer.write_all(&chunk).is_ok() {}
        });
        for _ in 0..20 {
            let read = stream.pump(0);
            assert!(read <= READ_BUDGET, "{read}");
            assert!(stream.data.is_empty());
        }
        drop(stream);
        writer.join().unwrap();
    }
}
