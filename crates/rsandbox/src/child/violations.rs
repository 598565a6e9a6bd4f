//! The child's violation channel: first it delivers the seccomp listener, then the
//! listener delivers one notification per forbidden call. The listener is the only
//! reporter of violations, so losing it is never silent: any failure other than a
//! notification cancelled by its caller's death stops the sandbox.
//!
//! In learning mode ([`Learning`]) the listener also reports file calls, and nothing is
//! fatal: a forbidden call is refused with `EPERM` and listed, a file call is judged
//! against the policy's rules, listed when they refuse it, and let go on to meet them.

use crate::errors::EngineError;
use crate::result::{LearningReport, RefusedFile};
use lockdown::observe::{self, ObservedCall};
use lockdown::seccomp::{self, Notification, Treatment};
use lockdown::Policy;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use wire::seqpacket::{Channel, Message};

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
    /// Network by proxy: the listener the child made in its network namespace, which
    /// arrives (tag `N`) before the seccomp listener (tag `L`).
    network: bool,
    proxy_listener: Option<OwnedFd>,
    /// The first forbidden call reported.
    pub(crate) syscall: Option<i64>,
    /// The code tried to make an internet socket, which a sandbox without the network
    /// is refused (`EACCES`, as without a report): since the last [`Self::take_refused_network`].
    refused_network: bool,
    /// Learning mode: what was refused so far, until the listener arrives.
    learning: Option<Learning>,
    /// Learning mode, once the listener has arrived: the thread answering it.
    served: Option<Arc<Mutex<Served>>>,
}

/// What the learning thread shares: its record, and why it stopped if it failed.
struct Served {
    learning: Learning,
    lost: Option<String>,
}

impl ViolationWatch {
    /// A watch for a child under `policy` (in learning mode when the policy says so).
    pub(crate) fn new(channel: Channel, policy: &Policy) -> ViolationWatch {
        let learning = policy.learning.then(|| Learning::new(policy.clone()));
        ViolationWatch {
            channel: Some(channel),
            listener: None,
            network: policy.network,
            proxy_listener: None,
            syscall: None,
            refused_network: false,
            learning,
            served: None,
        }
    }

    /// Whether this child is in learning mode.
    pub(crate) fn is_learning(&self) -> bool {
        self.learning.is_some() || self.served.is_some()
    }

    /// Learning mode: answer the listener on a thread of its own from now on. The child
    /// makes file calls that must be answered before it reports being locked down and
    /// between requests (its workspace, files put and got), when nobody polls the
    /// listener. If answering fails, the thread kills the child through `pidfd` (fail
    /// closed: a sandbox whose calls cannot be seen is not left running) and
    /// [`Self::learning_lost`] says why. The thread ends when every process under the
    /// filter is gone (the listener hangs up).
    pub(crate) fn serve_learning(&mut self, pidfd: BorrowedFd<'_>) -> std::io::Result<()> {
        let (Some(learning), Some(listener)) = (self.learning.take(), self.listener.take()) else {
            return Ok(());
        };
        let pidfd = pidfd.try_clone_to_owned()?;
        // Every observed file call is a round trip to this thread, which then runs on the
        // caller's CPU instead of waking the other one for each.
        seccomp::prefer_sync_wakeups(listener.as_raw_fd())?;
        let served = Arc::new(Mutex::new(Served { learning, lost: None }));
        let shared = served.clone();
        std::thread::Builder::new().name("rsandbox-learn".into()).spawn(move || serve(listener, pidfd, &shared))?;
        self.served = Some(served);
        Ok(())
    }

    /// Learning mode: why answering the listener failed, if it did (the child was killed).
    pub(crate) fn learning_lost(&self) -> Option<String> {
        self.served.as_ref().and_then(|s| s.lock().unwrap_or_else(|p| p.into_inner()).lost.clone())
    }

    /// Learning mode: what the child was refused since the last call, and start anew.
    pub(crate) fn take_learning_report(&mut self) -> Option<LearningReport> {
        match (&mut self.learning, &self.served) {
            (_, Some(served)) => Some(served.lock().unwrap_or_else(|p| p.into_inner()).learning.take()),
            (Some(learning), None) => Some(learning.take()),
            (None, None) => None,
        }
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
    /// before the child reports `locked_down`), waiting at most `timeout` for it (the
    /// child may hang before it installs seccomp). With the network by proxy, the proxy
    /// listener comes first ([`Self::take_proxy_listener`]).
    pub(crate) fn take_listener(&mut self, timeout: std::time::Duration) -> Result<(), EngineError> {
        let lost = |e: String| EngineError::Setup(format!("no violation reporter: {e}"));
        let channel = self.channel.take().ok_or_else(|| lost("the violation channel was already used".into()))?;
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let mut fd = libc::pollfd { fd: channel.as_fd().as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd, for the duration of the call.
            match unsafe { libc::poll(&mut fd, 1, left.as_millis().min(i32::MAX as u128) as i32) } {
                0 => return Err(lost(format!("the child sent no seccomp listener within {} s", timeout.as_secs()))),
                n if n < 0 => {
                    let e = std::io::Error::last_os_error();
                    return Err(lost(format!("failed to wait for the seccomp listener: {e}")));
                }
                _ => {}
            }
            let Message { bytes: tag, mut fds, fds_lost } = match channel.recv() {
                Ok(Some(message)) => message,
                Ok(None) => {
                    return Err(lost(
                        "the child closed its violation channel without sending the seccomp listener".into(),
                    ))
                }
                Err(e) => return Err(lost(format!("failed to receive the seccomp listener: {e}"))),
            };
            // The server's capacity, told as such (the child is ended with its channels).
            if fds_lost {
                return Err(EngineError::io("receive the sandbox's violation listener")(lockdown::fdpass::fds_lost()));
            }
            if fds.len() != 1 {
                let which = if self.network && self.proxy_listener.is_none() { "proxy" } else { "seccomp" };
                return Err(lost(format!("expected the {which} listener (one fd), got {} fds", fds.len())));
            }
            // The proxy listener, once, before the seccomp one, and only when asked for.
            if tag == lockdown::network::LISTENER_TAG && self.network && self.proxy_listener.is_none() {
                self.proxy_listener = fds.pop();
                continue;
            }
            if self.network && self.proxy_listener.is_none() {
                return Err(lost("the child sent no proxy listener before its seccomp listener".into()));
            }
            self.listener = fds.pop();
            return Ok(());
        }
    }

    /// Whether the code tried to reach the network, which this sandbox does not have,
    /// since the last call; and start anew.
    pub(crate) fn take_refused_network(&mut self) -> bool {
        std::mem::take(&mut self.refused_network)
    }

    /// Network by proxy: the listener received by [`Self::take_listener`] (once).
    pub(crate) fn take_proxy_listener(&mut self) -> Option<OwnedFd> {
        self.proxy_listener.take()
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
        match seccomp::receive_notification(listener.as_raw_fd()) {
            // Without the network the program reports only internet sockets (see
            // `SeccompProfile::report_network`): refused as it would have been, and noted.
            Ok(n) if n.syscall == libc::SYS_socket => {
                self.refused_network = true;
                match seccomp::refuse_notification(listener.as_raw_fd(), n.id, libc::EACCES) {
                    Err(e) if e.raw_os_error() != Some(libc::ENOENT) => {
                        Watch::Lost(format!("failed to answer a seccomp notification: {e}"))
                    }
                    _ => Watch::Quiet,
                }
            }
            Ok(n) => {
                self.syscall.get_or_insert(n.syscall);
                // The caller is killed next; the refusal only unblocks it sooner, and if
                // it fails the kill still follows.
                if let Err(e) = seccomp::deny_notification(listener.as_raw_fd(), n.id) {
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

/// The learning thread: answer every notification until all processes under the filter
/// are gone, or answering fails (then kill the child and say why).
fn serve(listener: OwnedFd, pidfd: OwnedFd, served: &Mutex<Served>) {
    loop {
        let mut fd = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, for the duration of the call.
        let n = unsafe { libc::poll(&mut fd, 1, -1) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return lose(served, &pidfd, format!("failed to poll the seccomp listener: {e}"));
        }
        if fd.revents & libc::POLLIN == 0 {
            // POLLHUP alone: every process under the filter is gone.
            return;
        }
        let watch = match seccomp::receive_notification(listener.as_raw_fd()) {
            Ok(n) => served.lock().unwrap_or_else(|p| p.into_inner()).learning.answer(listener.as_raw_fd(), &n),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Watch::Quiet,
            Err(e) => Watch::Lost(format!("failed to receive a seccomp notification: {e}")),
        };
        if let Watch::Lost(why) = watch {
            return lose(served, &pidfd, why);
        }
    }
}

fn lose(served: &Mutex<Served>, pidfd: &OwnedFd, why: String) {
    served.lock().unwrap_or_else(|p| p.into_inner()).lost = Some(why);
    // SAFETY: a valid pidfd; SIGKILL with no siginfo. If the child is already gone the
    // call fails harmlessly (ESRCH).
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
}

/// Most distinct file calls judged per report (8 bytes each).
const MAX_JUDGED: usize = 100_000;

/// Learning mode's record: the policy to judge file calls by, and what it refused.
struct Learning {
    policy: Policy,
    /// Hashes of the file calls judged since the last report (each is judged once; a
    /// hash, so that what the sandbox makes the supervisor keep stays small).
    judged: HashSet<u64>,
    report: LearningReport,
}

impl Learning {
    fn new(policy: Policy) -> Learning {
        Learning { policy, judged: HashSet::new(), report: LearningReport::default() }
    }

    fn take(&mut self) -> LearningReport {
        self.judged.clear();
        std::mem::take(&mut self.report)
    }

    /// Answer one notification: a file call the seccomp program allows goes on (Landlock
    /// and the mount namespace decide it); anything else is refused with `EPERM`, never
    /// executed, and listed. A path that cannot be read stops the sandbox: learning
    /// blind would print a profile that looks complete and is not.
    fn answer(&mut self, listener: RawFd, n: &Notification) -> Watch {
        let name = seccomp::syscall_name(n.syscall).unwrap_or("unknown");
        let runs = observe::is_observed(n.syscall)
            && match seccomp::treatment(n.syscall) {
                Some(Treatment::Allow) => true,
                Some(Treatment::Exec) => !self.policy.executable.is_empty(),
                _ => false,
            };
        if observe::is_observed(n.syscall) {
            match observe::read_observed_call(n) {
                // Still pending: the pid was the caller's while we read its memory.
                Ok(Some(call)) if seccomp::notification_pending(listener, n.id) => self.judge(call),
                Ok(_) => {}
                Err(_) if !seccomp::notification_pending(listener, n.id) => {}
                Err(e) => return Watch::Lost(format!("cannot read the path of a learning sandbox's {name} call: {e}")),
            }
        }
        let answered = if runs {
            seccomp::continue_notification(listener, n.id)
        } else {
            if !self.report.refused_calls.iter().any(|c| c == name) {
                self.report.refused_calls.push(name.to_string());
            }
            seccomp::deny_notification(listener, n.id)
        };
        match answered {
            Ok(()) => Watch::Quiet,
            // The caller died meanwhile.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Watch::Quiet,
            Err(e) => Watch::Lost(format!("failed to answer a seccomp notification: {e}")),
        }
    }

    fn judge(&mut self, call: ObservedCall) {
        let key = {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            call.hash(&mut hasher);
            hasher.finish()
        };
        if self.judged.contains(&key) {
            return;
        }
        if self.judged.len() >= MAX_JUDGED {
            self.report.truncated = true;
            return;
        }
        self.judged.insert(key);
        if self.policy.grants(&call.path, call.access) {
            return;
        }
        if self.report.refused_files.len() >= LearningReport::MAX_FILES {
            self.report.truncated = true;
            return;
        }
        let ObservedCall { path, access } = call;
        self.report.refused_files.push(RefusedFile { path: path_text(path), access });
    }
}

fn path_text(path: PathBuf) -> String {
    path.into_os_string().into_string().unwrap_or_else(|p| p.to_string_lossy().into_owned())
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
        let mut watch = ViolationWatch::new(ours, &Policy::default());
        watch.take_listener(std::time::Duration::from_secs(1)).unwrap();
        assert!(watch.has_listener());
        assert!(matches!(watch.service(libc::POLLIN), Watch::Lost(e) if e.contains("failed to receive")));
    }

    #[test]
    fn a_network_child_sends_its_proxy_listener_first_and_only_it_may() {
        let network = Policy { network: true, ..Policy::default() };
        let (proxy, _keep) = std::os::unix::net::UnixStream::pair().unwrap();
        let (ours, theirs) = Channel::pair().unwrap();
        theirs.send(b"N", &[proxy.as_fd()]).unwrap();
        theirs.send(b"L", &[proxy.as_fd()]).unwrap();
        let mut watch = ViolationWatch::new(ours, &network);
        watch.take_listener(std::time::Duration::from_secs(1)).unwrap();
        assert!(watch.has_listener() && watch.take_proxy_listener().is_some());
        // Without its proxy listener first, a network child is refused.
        let (ours, theirs) = Channel::pair().unwrap();
        theirs.send(b"L", &[proxy.as_fd()]).unwrap();
        let error = ViolationWatch::new(ours, &network).take_listener(std::time::Duration::from_secs(1)).unwrap_err();
        assert!(error.to_string().contains("no proxy listener"), "{error}");
        // A child without the network cannot hand one over: it is taken as the seccomp listener.
        let (ours, theirs) = Channel::pair().unwrap();
        theirs.send(b"N", &[proxy.as_fd()]).unwrap();
        let mut watch = ViolationWatch::new(ours, &Policy::default());
        watch.take_listener(std::time::Duration::from_secs(1)).unwrap();
        assert!(watch.take_proxy_listener().is_none());
    }

    #[test]
    fn a_missing_listener_is_an_error() {
        let (ours, theirs) = Channel::pair().unwrap();
        theirs.send(b"L", &[]).unwrap();
        let mut watch = ViolationWatch::new(ours, &Policy::default());
        assert_eq!(
            watch.take_listener(std::time::Duration::from_secs(1)).unwrap_err().to_string(),
            "the sandbox could not be set up: no violation reporter: expected the seccomp listener (one fd), got 0 fds"
        );
    }
}
