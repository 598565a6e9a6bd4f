//! Interrupting a running evaluation from another thread, the way Ctrl-C does: SIGINT
//! to the R process (the child turns it into an R interrupt), and a wake-up for the
//! supervisor's loop so that it starts counting the grace period at once.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A handle that interrupts whatever the child is evaluating now. Cheap to clone.
#[derive(Clone)]
pub struct Interrupter {
    inner: Arc<Inner>,
}

struct Inner {
    /// A duplicate of the child's pidfd: signals reach exactly that process.
    pidfd: OwnedFd,
    /// Wakes the supervisor's poll loop.
    wake: OwnedFd,
    requested: AtomicBool,
    /// Whether an execute is running. An idle child is never signalled: R would keep the
    /// interrupt pending and raise it inside the next request instead.
    running: AtomicBool,
}

impl Interrupter {
    pub(crate) fn new(pidfd: BorrowedFd<'_>) -> io::Result<Interrupter> {
        let pidfd = pidfd.try_clone_to_owned()?;
        let wake =
            rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK)?;
        Ok(Interrupter {
            inner: Arc::new(Inner { pidfd, wake, requested: AtomicBool::new(false), running: AtomicBool::new(false) }),
        })
    }

    /// Interrupt the running evaluation. `false` when nothing runs (an idle session:
    /// nothing is signalled, and the next execute is not affected) or the process is gone.
    pub fn interrupt(&self) -> bool {
        if !self.inner.running.load(Ordering::SeqCst) {
            return false;
        }
        self.inner.requested.store(true, Ordering::SeqCst);
        // EAGAIN (counter full) still wakes.
        rustix::io::write(&self.inner.wake, &1u64.to_ne_bytes()).ok();
        self.signal()
    }

    /// SIGINT to the child (the supervisor's own timeout path uses this too).
    pub(crate) fn signal(&self) -> bool {
        rustix::process::pidfd_send_signal(&self.inner.pidfd, rustix::process::Signal::INT).is_ok()
    }

    /// Mark the span of one execute: interrupts are delivered only while the returned
    /// guard lives.
    pub(crate) fn running(&self) -> Running {
        self.inner.running.store(true, Ordering::SeqCst);
        Running(self.clone())
    }

    /// The fd to poll for requests.
    pub(crate) fn wake_fd(&self) -> i32 {
        self.inner.wake.as_raw_fd()
    }

    /// Take a pending request (and drain the wake-up).
    pub(crate) fn take_request(&self) -> bool {
        // EAGAIN: nothing to drain.
        rustix::io::read(&self.inner.wake, &mut [0u8; 8]).ok();
        self.inner.requested.swap(false, Ordering::SeqCst)
    }
}

/// An execute in progress (see [`Interrupter::running`]); dropping it ends the span.
pub(crate) struct Running(Interrupter);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.inner.running.store(false, Ordering::SeqCst);
    }
}
