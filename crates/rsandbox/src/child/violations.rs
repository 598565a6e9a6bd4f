//! The child's violation channel: first it delivers the seccomp listener, then the
//! listener delivers one notification per forbidden call. The listener is the only
//! reporter of violations, so losing it is never silent: any failure other than a
//! notification cancelled by its caller's death stops the sandbox.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use wire::seqpacket::Channel;

/// What one readiness event on the violation channel meant.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Watch {
    /// Nothing to act on (the listener arrived, a cancelled notification, all gone).
    Quiet,
    /// A forbidden call was made (its number is kept in `syscall`).
    Violation,
    /// The reporter failed: violations could no longer be seen. Stop the sandbox.
    Lost(String),
}

pub(crate) struct ViolationWatch {
    channel: Option<Channel>,
    listener: Option<OwnedFd>,
    /// The first forbidden call reported.
    pub(crate) syscall: Option<i64>,
}

impl ViolationWatch {
    pub(crate) fn new(channel: Channel) -> ViolationWatch {
        ViolationWatch { channel: Some(channel), listener: None, syscall: None }
    }

    /// Whether the listener has arrived and is still open.
    #[cfg(test)]
    pub(crate) fn has_listener(&self) -> bool {
        self.listener.is_some()
    }

    pub(crate) fn poll_fd(&self) -> i32 {
        match (&self.listener, &self.channel) {
            (Some(l), _) => l.as_raw_fd(),
            (None, Some(c)) => c.as_fd().as_raw_fd(),
            (None, None) => -1,
        }
    }

    /// Receive the listener the child sends while installing seccomp (it arrives
    /// before the child reports `locked_down`).
    pub(crate) fn take_listener(&mut self) -> Result<(), String> {
        let channel = self.channel.take().ok_or("the violation channel was already used")?;
        match channel.recv() {
            Ok(Some((_, mut fds))) if fds.len() == 1 => {
                self.listener = fds.pop();
                Ok(())
            }
            Ok(Some((_, fds))) => Err(format!("expected the seccomp listener (one fd), got {} fds", fds.len())),
            Ok(None) => Err("the child closed its violation channel without sending the seccomp listener".into()),
            Err(e) => Err(format!("failed to receive the seccomp listener: {e}")),
        }
    }

    /// Handle readiness of [`Self::poll_fd`].
    pub(crate) fn service(&mut self, revents: i16) -> Watch {
        let Some(listener) = &self.listener else {
            return Watch::Quiet;
        };
        if revents & libc::POLLIN == 0 {
            // POLLHUP alone: every process under the filter is gone.
            self.listener = None;
            return Watch::Quiet;
        }
        match lockdown::seccomp::receive_notification(listener.as_raw_fd()) {
            Ok(n) => {
                self.syscall.get_or_insert(n.syscall);
                // The caller is killed next; the refusal only unblocks it sooner, and if
                // it fails the kill still follows.
                if let Err(e) = lockdown::seccomp::deny_notification(listener.as_raw_fd(), n.id) {
                    if e.raw_os_error() != Some(libc::ENOENT) {
                        return Watch::Lost(format!("failed to answer a seccomp notification: {e}"));
                    }
                }
                Watch::Violation
            }
            // The caller died before we looked: that notification is gone, but the
            // listener must stay, or later violations would only fail with ENOSYS.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Watch::Quiet,
            Err(e) => Watch::Lost(format!("failed to receive a seccomp notification: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_that_fails_is_reported_lost() {
        let (ours, theirs) = Channel::pair().unwrap();
        // Not a seccomp listener: receiving a notification from it fails.
        let (not_a_listener, _keep) = std::os::unix::net::UnixStream::pair().unwrap();
        theirs.send(b"L", &[not_a_listener.as_fd()]).unwrap();
        let mut watch = ViolationWatch::new(ours);
        watch.take_listener().unwrap();
        assert!(watch.has_listener());
        assert!(matches!(watch.service(libc::POLLIN), Watch::Lost(e) if e.contains("failed to receive")));
    }

    #[test]
    fn a_missing_listener_is_an_error() {
        let (ours, theirs) = Channel::pair().unwrap();
        theirs.send(b"L", &[]).unwrap();
        let mut watch = ViolationWatch::new(ours);
        assert_eq!(watch.take_listener().unwrap_err(), "expected the seccomp listener (one fd), got 0 fds");
    }
}
