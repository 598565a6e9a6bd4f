//! One input read in turns by several threads (the stdio protocol's, and each daemon
//! connection's): the thread that reads a request runs it itself, and the next line is
//! read by another thread meanwhile, so a long request never holds up the next one.
//!
//! Who reads next is decided by the input itself. The threads waiting for their turn
//! wait in one epoll set, where the input is registered one-shot: a line that arrives
//! wakes exactly one of them (epoll wakes one waiter per event), the one that reads it.
//! The thread that has read a request only re-arms the input (one `epoll_ctl`) and runs
//! its request; it wakes nobody. Handing the turn to a waiting thread through a mutex
//! instead woke that thread on every request, and on a virtual machine waking a thread
//! on the other, idle CPU costs the waker 20-35 µs before its request could start
//! (`serve --stdio`, a session's `1+1` back to back, two servers alternating: 0.88 of
//! the time; DESIGN.md, "Children ready before requests").
//!
//! A turn is handed on directly (an eventfd in the same set) only when no new bytes will
//! announce it: when the line read left more bytes in the reader's buffer (requests
//! sent together), and when the input has ended (each waiting thread is woken in turn and
//! leaves).

use rustix::event::epoll;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Longest request line accepted (a `put_file` of about 12 MiB fits).
pub const MAX_LINE: usize = 16 << 20;

/// The input and the threads that take turns reading it.
pub(crate) struct ReadingTurn {
    lines: Mutex<LineReader>,
    /// Threads reading or waiting to: while one runs a request, another must be here.
    pub(crate) readers: AtomicUsize,
    /// The input ended: the threads waiting to read end too.
    ended: AtomicBool,
    /// Where the waiting threads wait: the input and `handover`, both one-shot.
    waiters: OwnedFd,
    /// The input as registered in `waiters` (the reader reads a duplicate of it); `None`
    /// for an input epoll cannot watch (a regular file, `/dev/null`), which never
    /// blocks a read: its turns are all handed on.
    input: Option<OwnedFd>,
    /// Signalled to hand the turn to a waiting thread without new bytes.
    handover: OwnedFd,
}

const INPUT: u64 = 0;
const HANDOVER: u64 = 1;

impl ReadingTurn {
    /// Threads may take turns on `input` (a pipe, a terminal or a socket; anything epoll
    /// can watch). Fails only when the process is out of descriptors.
    pub(crate) fn new(input: OwnedFd) -> io::Result<ReadingTurn> {
        let reader = File::from(input.try_clone()?);
        let waiters = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let handover =
            rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK)?;
        // Registered disarmed: armed (and signalled) only to hand a turn on.
        epoll::add(&waiters, &handover, epoll::EventData::new_u64(HANDOVER), epoll::EventFlags::ONESHOT)?;
        let input = match epoll::add(&waiters, &input, epoll::EventData::new_u64(INPUT), one_shot()) {
            Ok(()) => Some(input),
            // Not pollable (`serve --stdio < requests`): always ready to read.
            Err(rustix::io::Errno::PERM) => None,
            Err(e) => return Err(e.into()),
        };
        let turn = ReadingTurn {
            lines: Mutex::new(LineReader { input: BufReader::new(reader), buf: Vec::new() }),
            readers: AtomicUsize::new(1),
            ended: AtomicBool::new(false),
            waiters,
            input,
            handover,
        };
        if turn.input.is_none() {
            // No bytes will announce the first turn either.
            turn.hand_over();
        }
        Ok(turn)
    }

    /// Wait until it is this thread's turn, then hold the reader. `None`: the input has
    /// ended (or can no longer be waited for), and this thread leaves; the next waiting
    /// thread is woken to leave too.
    pub(crate) fn take(&self) -> Option<MutexGuard<'_, LineReader>> {
        let woken = self.wait();
        // A thread that panicked while reading left the reader as it was (at a line
        // boundary or within a line the next read completes).
        let lines = self.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if woken.is_err() || self.ended.load(Ordering::SeqCst) {
            self.end();
            return None;
        }
        Some(lines)
    }

    /// The input has ended: every thread waiting for a turn leaves, one after another.
    pub(crate) fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
        self.hand_over();
    }

    /// After a request was read: the next turn goes to the thread its bytes wake, or at
    /// once to a waiting thread when they are already in the reader's buffer.
    pub(crate) fn pass_on(&self, lines: &LineReader) {
        let rearmed = match &self.input {
            Some(input) if !lines.has_buffered() => {
                // Cannot fail for a registered descriptor; should it, the turn still
                // passes (at the cost of a wake-up) rather than leaving no one to read.
                epoll::modify(&self.waiters, input, epoll::EventData::new_u64(INPUT), one_shot()).is_ok()
            }
            _ => false,
        };
        if !rearmed {
            self.hand_over();
        }
    }

    /// Wake one waiting thread now.
    fn hand_over(&self) {
        // An eventfd's counter only fails to grow at its maximum, when it is signalled
        // already; arming it is what wakes a waiter.
        let _ = rustix::io::write(&self.handover, &1u64.to_ne_bytes());
        let _ = epoll::modify(&self.waiters, &self.handover, epoll::EventData::new_u64(HANDOVER), one_shot());
    }

    /// Block until an event of the set is this thread's: new bytes, or a handed-on turn.
    fn wait(&self) -> io::Result<()> {
        let mut events = Vec::with_capacity(1);
        loop {
            events.clear();
            match epoll::wait(&self.waiters, rustix::buffer::spare_capacity(&mut events), None) {
                Ok(_) if events.is_empty() => continue,
                Ok(_) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        if events[0].data.u64() == HANDOVER {
            // Reset the counter for the next hand-over (empty already: nothing to do).
            let mut count = [0u8; 8];
            let _ = rustix::io::read(&self.handover, &mut count);
        }
        Ok(())
    }
}

fn one_shot() -> epoll::EventFlags {
    epoll::EventFlags::IN | epoll::EventFlags::ONESHOT
}

/// Reads lines, refusing (and skipping) those longer than [`MAX_LINE`].
pub(crate) struct LineReader<R = BufReader<File>> {
    input: R,
    buf: Vec<u8>,
}

impl LineReader {
    /// Whether bytes already read from the input wait in the buffer (the next line, or
    /// part of it): no new bytes will announce them.
    fn has_buffered(&self) -> bool {
        !self.input.buffer().is_empty()
    }
}

impl<R: BufRead> LineReader<R> {
    /// `Some(Ok(line))`, `Some(Err(length))` for an oversized or non-UTF-8 line, `None` at EOF.
    pub(crate) fn next_line(&mut self) -> Option<Result<String, usize>> {
        self.buf.clear();
        let mut too_long = 0usize;
        loop {
            let chunk = match self.input.fill_buf() {
                Ok(c) => c,
                Err(_) => return None,
            };
            if chunk.is_empty() {
                return match (too_long, self.buf.is_empty()) {
                    (0, true) => None,
                    (0, false) => {
                        Some(String::from_utf8(std::mem::take(&mut self.buf)).map_err(|e| e.as_bytes().len()))
                    }
                    (n, _) => Some(Err(n)),
                };
            }
            let (part, done) = match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (&chunk[..i], Some(i + 1)),
                None => (chunk, None),
            };
            if too_long > 0 || self.buf.len() + part.len() > MAX_LINE {
                too_long = too_long.max(self.buf.len()) + part.len();
                self.buf.clear();
            } else {
                self.buf.extend_from_slice(part);
            }
            let consumed = done.unwrap_or(chunk.len());
            self.input.consume(consumed);
            if done.is_some() {
                if too_long > 0 {
                    return Some(Err(too_long));
                }
                return Some(String::from_utf8(std::mem::take(&mut self.buf)).map_err(|e| e.as_bytes().len()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn oversized_lines_are_refused_and_skipped() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\n{\"ok\":1}\n");
        let mut r = LineReader { input: &input[..], buf: Vec::new() };
        assert_eq!(r.next_line(), Some(Err(MAX_LINE + 10)));
        assert_eq!(r.next_line(), Some(Ok("{\"ok\":1}".to_string())));
        assert_eq!(r.next_line(), None);
    }

    /// What one thread of a server does with its turn: read a line, pass the turn on.
    fn read_one(turn: &ReadingTurn) -> Option<String> {
        let mut lines = turn.take()?;
        let line = lines.next_line();
        match line {
            Some(Ok(line)) => {
                turn.pass_on(&lines);
                Some(line)
            }
            _ => {
                turn.end();
                None
            }
        }
    }

    /// A turn on a pipe's reading end, and its writing end: the client.
    fn piped() -> (ReadingTurn, std::io::PipeWriter) {
        let (reader, writer) = std::io::pipe().unwrap();
        (ReadingTurn::new(reader.into()).unwrap(), writer)
    }

    /// `n` threads of `scope` taking turns on `turn`, each running `body` with its own
    /// sender of what it read.
    fn spawn_readers<'a, T: Send + 'a>(
        scope: &'a std::thread::Scope<'a, '_>,
        n: usize,
        turn: &'a ReadingTurn,
        sender: &mpsc::Sender<T>,
        body: fn(&ReadingTurn, mpsc::Sender<T>),
    ) {
        for _ in 0..n {
            let sender = sender.clone();
            scope.spawn(move || body(turn, sender));
        }
    }

    /// Every line the thread reads, then `None` when the input has ended.
    fn read_all(turn: &ReadingTurn, sender: mpsc::Sender<Option<String>>) {
        while let Some(line) = read_one(turn) {
            sender.send(Some(line)).unwrap();
        }
        sender.send(None).unwrap();
    }

    /// Lines sent together arrive in one read: no new bytes announce the second and
    /// third, so the turn is handed on directly, and each is read by a thread of its own.
    #[test]
    fn lines_sent_together_are_each_read_by_a_waiting_thread() {
        let (turn, mut writer) = piped();
        let (sender, read) = mpsc::channel();
        std::thread::scope(|scope| {
            // Each thread reads one line and keeps it (its "request" runs forever).
            spawn_readers(scope, 3, &turn, &sender, |turn, sender| sender.send(read_one(turn)).unwrap());
            writer.write_all(b"one\ntwo\nthree\n").unwrap();
            let mut got: Vec<_> = (0..3).map(|_| read.recv_timeout(Duration::from_secs(10)).expect("a line")).collect();
            got.sort();
            assert_eq!(got, [Some("one".into()), Some("three".into()), Some("two".into())]);
            drop(writer);
        });
    }

    /// A regular file (`serve --stdio < requests`) cannot be watched by epoll: every
    /// turn is handed on, and each line is still read once.
    #[test]
    fn an_input_epoll_cannot_watch_is_read_all_the_same() {
        let path = std::env::temp_dir().join(format!("rsandbox-reading-{}", std::process::id()));
        std::fs::write(&path, "a\nb\nc\n").unwrap();
        let file = File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let turn = ReadingTurn::new(file.into()).unwrap();
        assert!(turn.input.is_none());
        let (sender, read) = mpsc::channel();
        std::thread::scope(|scope| spawn_readers(scope, 2, &turn, &sender, read_all));
        let mut got: Vec<Option<String>> = read.try_iter().collect();
        got.sort();
        assert_eq!(got, [None, None, Some("a".into()), Some("b".into()), Some("c".into())]);
    }

    /// A line written while every thread waits wakes one of them; the end of the input
    /// wakes each waiting thread in turn, and each leaves.
    #[test]
    fn the_end_of_the_input_reaches_every_waiting_thread() {
        let (turn, mut writer) = piped();
        let (sender, read) = mpsc::channel();
        std::thread::scope(|scope| {
            spawn_readers(scope, 4, &turn, &sender, read_all);
            writer.write_all(b"first\n").unwrap();
            assert_eq!(read.recv_timeout(Duration::from_secs(10)).unwrap(), Some("first".into()));
            writer.write_all(b"second\n").unwrap();
            assert_eq!(read.recv_timeout(Duration::from_secs(10)).unwrap(), Some("second".into()));
            drop(writer);
            for _ in 0..4 {
                assert_eq!(read.recv_timeout(Duration::from_secs(10)).expect("a thread left"), None);
            }
        });
    }
}
