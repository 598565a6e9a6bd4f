//! The supervisor <-> zygote channel, one typed end per role: [`ZygoteLink`] is the
//! supervisor's, [`SupervisorLink`] the zygote's. Methods are the protocol's steps.

use crate::errors::{Peer, WireError};
use crate::messages::{ZygoteEvent, ZygoteRequest, SPAWN_FDS};
use crate::seqpacket::{Channel, Message};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

/// What the zygote reports once R is up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ready {
    /// `R.version.string`.
    pub r_version: String,
    /// `R.home()`.
    pub r_home: PathBuf,
    /// `.libPaths()`.
    pub library_paths: Vec<PathBuf>,
    /// R's own trees, by the variable that names each (`R_SHARE_DIR`, …).
    pub r_directories: Vec<(String, PathBuf)>,
    /// Packages loaded before forking.
    pub preloaded: Vec<String>,
}

/// The fds a spawn request carries, in protocol order.
pub struct SpawnFds<T> {
    /// The child's end of its control stream.
    pub control: T,
    /// Write end of the child's stdout pipe.
    pub stdout: T,
    /// Write end of the child's stderr pipe.
    pub stderr: T,
    /// The child's end of the violation channel (the seccomp listener travels on it).
    pub violations: T,
}

/// The supervisor's end.
#[derive(Debug)]
pub struct ZygoteLink {
    channel: Channel,
}

/// How the zygote's start-up ended.
#[derive(Debug)]
pub enum StartUp {
    /// R is up.
    Ready(Ready),
    /// R or a preload failed; the zygote exits.
    Failed(String),
}

impl ZygoteLink {
    /// A new channel: the supervisor's end and the fd the zygote inherits.
    pub fn pair() -> Result<(ZygoteLink, OwnedFd), WireError> {
        let (ours, theirs) = Channel::pair().map_err(WireError::io("create the channel", Peer::Zygote))?;
        Ok((ZygoteLink { channel: ours }, theirs.into()))
    }

    /// Wait for the zygote's first message.
    pub fn await_start_up(&self) -> Result<StartUp, WireError> {
        match self.next_event()? {
            None => Err(WireError::Closed { peer: Peer::Zygote, expected: "ready" }),
            Some((ZygoteEvent::Ready { r_version, r_home, library_paths, r_directories, preloaded }, _)) => {
                Ok(StartUp::Ready(Ready { r_version, r_home, library_paths, r_directories, preloaded }))
            }
            Some((ZygoteEvent::StartFailed { error }, _)) => Ok(StartUp::Failed(error)),
            Some((other, _)) => Err(WireError::Unexpected { peer: Peer::Zygote, expected: "ready", got: other.tag() }),
        }
    }

    /// Ask for a child; `fds` go with the request.
    pub fn request_spawn(&self, request: &ZygoteRequest, fds: SpawnFds<BorrowedFd<'_>>) -> Result<(), WireError> {
        let bytes = serde_json::to_vec(request)
            .map_err(|e| WireError::Malformed { peer: Peer::Supervisor, detail: e.to_string() })?;
        let fds = [fds.control, fds.stdout, fds.stderr, fds.violations];
        self.channel.send(&bytes, &fds).map_err(WireError::io("send a spawn request", Peer::Zygote))
    }

    /// The next event (`spawned` carries the child's pidfd). `Ok(None)`: the zygote is gone.
    /// A `spawned` whose pidfd this process had no descriptor for comes without it (the
    /// supervisor's capacity: that one spawn fails, the link serves on).
    pub fn next_event(&self) -> Result<Option<(ZygoteEvent, Option<OwnedFd>)>, WireError> {
        let Some(Message { bytes, mut fds, fds_lost }) =
            self.channel.recv().map_err(WireError::io("read an event", Peer::Zygote))?
        else {
            return Ok(None);
        };
        let event: ZygoteEvent = serde_json::from_slice(&bytes)
            .map_err(|e| WireError::Malformed { peer: Peer::Zygote, detail: e.to_string() })?;
        let expected_fds = usize::from(matches!(event, ZygoteEvent::Spawned { .. }));
        if fds_lost && expected_fds == 1 && fds.is_empty() {
            return Ok(Some((event, None)));
        }
        if fds.len() != expected_fds || fds_lost {
            return Err(WireError::Unexpected {
                peer: Peer::Zygote,
                expected: "a pidfd with spawned and no fd otherwise",
                got: format!("{} with {} fds", event.tag(), fds.len()),
            });
        }
        Ok(Some((event, fds.pop())))
    }
}

/// A request as the zygote received it.
#[derive(Debug)]
pub struct Received {
    /// The request.
    pub request: ZygoteRequest,
    /// The fds that came with it, in order.
    pub fds: Vec<OwnedFd>,
    /// Some fds sent with it found no free descriptor here and were closed by the kernel
    /// (the zygote's open-file limit): `fds` holds fewer than were sent.
    pub fds_lost: bool,
}

/// The zygote's end.
#[derive(Debug)]
pub struct SupervisorLink {
    channel: Channel,
}

impl SupervisorLink {
    /// Wrap the fd the supervisor handed us.
    pub fn from_fd(fd: OwnedFd) -> SupervisorLink {
        SupervisorLink { channel: Channel::from_fd(fd) }
    }

    fn send(&self, event: &ZygoteEvent, fds: &[BorrowedFd<'_>]) -> Result<(), WireError> {
        let bytes = serde_json::to_vec(event)
            .map_err(|e| WireError::Malformed { peer: Peer::Zygote, detail: e.to_string() })?;
        self.channel.send(&bytes, fds).map_err(WireError::io("send an event", Peer::Supervisor))
    }

    /// R is up.
    pub fn announce_ready(&self, ready: Ready) -> Result<(), WireError> {
        let Ready { r_version, r_home, library_paths, r_directories, preloaded } = ready;
        self.send(&ZygoteEvent::Ready { r_version, r_home, library_paths, r_directories, preloaded }, &[])
    }

    /// R could not be started; the zygote exits after this.
    pub fn report_start_failed(&self, error: String) -> Result<(), WireError> {
        self.send(&ZygoteEvent::StartFailed { error }, &[])
    }

    /// The next request. `Ok(None)`: the supervisor closed the channel. The fds are
    /// returned as they came; [`spawn_fds`] checks their number.
    pub fn next_request(&self) -> Result<Option<Received>, WireError> {
        let Message { bytes, fds, fds_lost } = match self.channel.recv() {
            Ok(Some(message)) => message,
            // A supervisor that exits without reading our last events resets the
            // channel instead of closing it: either way it is gone.
            Ok(None) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(None),
            Err(e) => return Err(WireError::io("read a request", Peer::Supervisor)(e)),
        };
        let request = serde_json::from_slice(&bytes)
            .map_err(|e| WireError::Malformed { peer: Peer::Supervisor, detail: e.to_string() })?;
        Ok(Some(Received { request, fds, fds_lost }))
    }

    /// A child was forked; its pidfd goes along.
    pub fn report_spawned(&self, req: u64, pid: i32, pidfd: BorrowedFd<'_>) -> Result<(), WireError> {
        self.send(&ZygoteEvent::Spawned { req, pid }, &[pidfd])
    }

    /// A spawn request could not be served; `capacity`: for want of a process, memory or
    /// a descriptor (see [`ZygoteEvent::SpawnFailed`]).
    pub fn report_spawn_failed(&self, req: u64, error: String, capacity: bool) -> Result<(), WireError> {
        self.send(&ZygoteEvent::SpawnFailed { req, error, capacity }, &[])
    }

    /// A child has ended and its process group is gone.
    pub fn report_exited(&self, exited: ZygoteEvent) -> Result<(), WireError> {
        match exited {
            ZygoteEvent::Exited { .. } => self.send(&exited, &[]),
            other => Err(WireError::Unexpected { peer: Peer::Zygote, expected: "an exited event", got: other.tag() }),
        }
    }
}

impl AsFd for SupervisorLink {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.channel.as_fd()
    }
}

/// The fds of a spawn request in their roles, or an error naming the count.
pub fn spawn_fds(fds: Vec<OwnedFd>) -> Result<SpawnFds<OwnedFd>, WireError> {
    let count = fds.len();
    let [control, stdout, stderr, violations] =
        <[OwnedFd; SPAWN_FDS]>::try_from(fds).map_err(|_| WireError::Unexpected {
            peer: Peer::Supervisor,
            expected: "spawn with exactly 4 fds",
            got: format!("{count} fds"),
        })?;
    Ok(SpawnFds { control, stdout, stderr, violations })
}

impl ZygoteEvent {
    /// The message's tag, for errors.
    pub fn tag(&self) -> String {
        match self {
            ZygoteEvent::Ready { .. } => "ready",
            ZygoteEvent::StartFailed { .. } => "start_failed",
            ZygoteEvent::Spawned { .. } => "spawned",
            ZygoteEvent::SpawnFailed { .. } => "spawn_failed",
            ZygoteEvent::Exited { .. } => "exited",
        }
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_up_and_unexpected_messages_are_named() {
        let (link, theirs) = ZygoteLink::pair().unwrap();
        let zygote = SupervisorLink::from_fd(theirs);
        zygote.report_spawn_failed(7, "no".into(), false).unwrap();
        let err = link.await_start_up().unwrap_err().to_string();
        assert_eq!(err, "expected ready from the zygote, got spawn_failed");
        zygote
            .announce_ready(Ready {
                r_version: "R 4".into(),
                r_home: "/usr/lib/R".into(),
                library_paths: vec![],
                r_directories: vec![],
                preloaded: vec![],
            })
            .unwrap();
        assert!(matches!(link.await_start_up().unwrap(), StartUp::Ready(r) if r.r_version == "R 4"));
        drop(zygote);
        assert!(matches!(link.await_start_up(), Err(WireError::Closed { peer: Peer::Zygote, .. })));
    }

    #[test]
    fn a_spawned_event_without_its_pidfd_is_refused() {
        let (link, theirs) = ZygoteLink::pair().unwrap();
        let zygote = SupervisorLink::from_fd(theirs);
        zygote.send(&ZygoteEvent::Spawned { req: 1, pid: 2 }, &[]).unwrap();
        let err = link.next_event().unwrap_err().to_string();
        assert!(err.contains("got spawned with 0 fds"), "{err}");
    }

    /// A `spawned` whose pidfd the kernel could not install (no descriptor free in the
    /// supervisor) comes without it, and the link serves on: that spawn fails as the
    /// server's capacity, not every sandbox with a link torn down. Rlimits are the whole
    /// process's, so this runs in a copy of the test binary with this test alone.
    #[test]
    fn a_pidfd_that_found_no_free_descriptor_is_lost_and_the_link_serves_on() {
        const ALONE: &str = "RSANDBOX_WIRE_TEST_ALONE";
        let name = "zygote_link::tests::a_pidfd_that_found_no_free_descriptor_is_lost_and_the_link_serves_on";
        if std::env::var_os(ALONE).is_none() {
            let run = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", name, "--test-threads=1", "--nocapture"])
                .env(ALONE, "1")
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&run.stdout) + String::from_utf8_lossy(&run.stderr);
            assert!(run.status.success() && said.contains("1 passed"), "{said}");
            return;
        }
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        let (link, theirs) = ZygoteLink::pair().unwrap();
        let zygote = SupervisorLink::from_fd(theirs);
        let (pidfd, _other_end) = std::os::unix::net::UnixStream::pair().unwrap();
        zygote.report_spawned(1, 2, pidfd.as_fd()).unwrap();
        zygote.report_spawned(3, 4, pidfd.as_fd()).unwrap();
        // The limit at the lowest free number: no descriptor is free.
        let lowest = std::os::fd::AsRawFd::as_raw_fd(&std::fs::File::open("/dev/null").unwrap()) as u64;
        let limit = getrlimit(Resource::Nofile);
        setrlimit(Resource::Nofile, Rlimit { current: Some(lowest), maximum: limit.maximum }).unwrap();
        let without = link.next_event();
        setrlimit(Resource::Nofile, limit).unwrap();
        assert!(matches!(without, Ok(Some((ZygoteEvent::Spawned { req: 1, pid: 2 }, None)))), "{without:?}");
        let with = link.next_event().unwrap();
        assert!(matches!(with, Some((ZygoteEvent::Spawned { req: 3, pid: 4 }, Some(_)))), "{with:?}");

        // The other way: a spawn request whose channels find no free descriptor in the
        // zygote says so, and the zygote answers it as its capacity.
        let request = ZygoteRequest::Spawn {
            req: 5,
            policy: lockdown::Policy::default(),
            workspace: "/tmp".into(),
            env: vec![],
            tools: vec![],
            warm_up: false,
        };
        let fd = pidfd.as_fd();
        link.request_spawn(&request, SpawnFds { control: fd, stdout: fd, stderr: fd, violations: fd }).unwrap();
        link.request_spawn(&request, SpawnFds { control: fd, stdout: fd, stderr: fd, violations: fd }).unwrap();
        let lowest = std::os::fd::AsRawFd::as_raw_fd(&std::fs::File::open("/dev/null").unwrap()) as u64;
        setrlimit(Resource::Nofile, Rlimit { current: Some(lowest + 2), maximum: limit.maximum }).unwrap();
        let cut = zygote.next_request();
        setrlimit(Resource::Nofile, limit).unwrap();
        let cut = cut.unwrap().unwrap();
        assert!(cut.fds_lost && cut.fds.len() == 2, "{cut:?}");
        let whole = zygote.next_request().unwrap().unwrap();
        assert!(!whole.fds_lost && whole.fds.len() == 4, "{whole:?}");
        zygote.report_spawn_failed(5, "no descriptor".into(), true).unwrap();
        let answer = link.next_event().unwrap();
        assert!(matches!(answer, Some((ZygoteEvent::SpawnFailed { req: 5, capacity: true, .. }, None))), "{answer:?}");
    }

    /// A zygote from before the field says nothing of capacity: a failure, as it was.
    #[test]
    fn a_spawn_failure_without_its_capacity_field_is_a_failure() {
        let old: ZygoteEvent = serde_json::from_str(r#"{"event":"spawn_failed","req":1,"error":"no"}"#).unwrap();
        assert!(matches!(old, ZygoteEvent::SpawnFailed { capacity: false, .. }), "{old:?}");
    }

    #[test]
    fn spawn_requests_need_four_fds() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let err = spawn_fds(vec![a.into(), b.into()]).err().unwrap().to_string();
        assert_eq!(err, "expected spawn with exactly 4 fds from the supervisor, got 2 fds");
    }
}
