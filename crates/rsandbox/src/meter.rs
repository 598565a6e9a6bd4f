//! The sandbox-wide meter: CPU and memory summed over every process of a sandbox, read
//! by the supervisor from `/proc` while a request runs, so that a limit is per sandbox
//! and not per process (ten children under `RLIMIT_AS` hold ten times the memory; eight
//! spinning children each stay under `RLIMIT_CPU`).
//!
//! When: only once the sandbox is more than one process. Until then its rlimits bound
//! it exactly (`RLIMIT_AS` and `RLIMIT_CPU` cover all of a process's threads) and
//! nothing walks its processes (each member costs a few reads of `/proc`). Whether it is
//! ([`Meter::has_company`]) is read from the leader's children and its reaped CPU, a few
//! small files, at every sampling interval and at the end of each request. seccomp does not report
//! forks: a notified `fork` fails with `EINTR` when a signal arrives before the answer.
//!
//! Which processes: the sandbox's process group. The child makes its own group before
//! any user code, seccomp refuses `setsid`/`setpgid` after that, so every descendant
//! stays in it; and the child is a child subreaper, so orphans are reparented to it and
//! their CPU reaches its `cutime` when it reaps them, inside the group. So the group is
//! found by walking the leader's descendants, never by scanning the host's processes.
//!
//! What is counted:
//! * CPU: `utime + stime + cutime + cstime` of every live (or zombie) member, which is
//!   exact for every process that was waited for inside the group. A process reaped
//!   automatically (`SIGCHLD` ignored) takes its CPU with it if it lived less than one
//!   sampling interval; the wall-clock deadline still bounds it.
//! * Memory: `Pss_Anon + Pss_Shmem` (`/proc/PID/smaps_rollup`) where the supervisor may
//!   read it (as root: pages a forked child shares with its parent count once), else
//!   `RssAnon + RssShmem` (`/proc/PID/status`; a forked child's shared pages count
//!   again, so the meter errs on the side of the limit). The baseline (what the child
//!   shares with the zygote when it is made) is not the code's: it is subtracted. With
//!   PSS it is estimated from counters and the zygote's own PSS ([`PssShare`]), not read
//!   by walking every child's page tables.
//!
//! Between two samples (every [`INTERVAL`]) the sandbox can exceed a total by what it
//! allocates or burns in that time; the per-process `RLIMIT_AS` and `RLIMIT_CPU` still
//! bound each process meanwhile.

use crate::errors::out_of_descriptors;
use std::fs;
use std::io;
use std::time::{Duration, Instant};

/// How often the meter samples a running request.
pub const INTERVAL: Duration = Duration::from_millis(50);

/// How memory is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MemoryAccounting {
    /// Proportional set size: shared pages split among their sharers.
    Pss,
    /// Resident set size: shared pages count in each process.
    Rss,
}

/// One reading of a sandbox.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// CPU of the whole group, milliseconds.
    pub cpu_ms: u64,
    /// Memory of the whole group, bytes (before the baseline is subtracted).
    pub memory: u64,
    /// Live members.
    pub processes: u32,
}

/// The meter of one sandbox (its process group).
#[derive(Debug)]
pub struct Meter {
    pgid: i32,
    accounting: MemoryAccounting,
    /// Memory of the group when the meter was made: not the code's.
    baseline: u64,
    ticks_per_ms: f64,
    /// The leader's `cutime + cstime` when [`Meter::has_company`] last looked: growth
    /// means a child lived and was reaped in between.
    reaped_ticks: std::cell::Cell<u64>,
    /// The leader's `/proc/PID/stat` and its main thread's `children`, opened once and
    /// read again from the start at each look of [`Meter::has_company`] (at every
    /// sample and at the end of every session request): opening them by path cost an
    /// open, two reads and a close each, and a walk of `task/`, on every request's path.
    /// Held open, they also cannot name another process: once the leader is reaped a
    /// read fails with `ESRCH`, whoever gets its pid.
    leader_stat: fs::File,
    leader_children: fs::File,
    /// With PSS: the group's memory at the last walk of its page tables, and when the
    /// next walk is due (see [`WALK_SHARE`]).
    walked: std::cell::Cell<Option<(u64, Instant)>>,
}

/// With PSS, a sample walks every member's page tables (`smaps_rollup`, ~1 ms for a
/// forked R): thirty `mcparallel` children made the walks of every [`INTERVAL`] two
/// thirds of the supervisor's core. So the memory is walked again only after this many
/// times as long as the last walk took (at least one interval): the walks take at most a
/// fifth of a core, and a group that large has its memory read every ~0.2 s instead of
/// 50 ms, its CPU still every interval, and each process stays under its own
/// `RLIMIT_AS` meanwhile. The last reading of a request is always a fresh walk.
const WALK_SHARE: u32 = 5;
/// The longest time between two walks, whatever they cost: a group made of so many
/// processes that its walks would be spaced further is still held to its memory limit
/// within this (the supervisor then spends more than a fifth of a core on it).
const MAX_WALK_GAP: Duration = Duration::from_secs(1);

impl Meter {
    /// A meter for the group led by `leader`, with its current memory as the baseline
    /// (with PSS, read by walking its page tables): the reference the tests hold
    /// [`Meter::for_child`]'s estimate against, and the meter of a group that is no
    /// zygote's child.
    #[cfg(test)]
    fn new(leader: i32) -> io::Result<Meter> {
        Meter::with_baseline(leader, |meter| meter.memory_of(leader))
    }

    /// A meter for a child of the zygote that `share` reads, made a moment ago: its
    /// baseline is estimated from counters (see [`PssShare`]) instead of walking the
    /// child's page tables.
    pub fn for_child(leader: i32, share: &PssShare) -> io::Result<Meter> {
        Meter::with_baseline(leader, |meter| match meter.accounting {
            MemoryAccounting::Pss => Ok((resident_of(leader)? as f64 * share.ratio()?) as u64),
            MemoryAccounting::Rss => meter.memory_of(leader),
        })
    }

    fn with_baseline(leader: i32, baseline: impl FnOnce(&Meter) -> io::Result<u64>) -> io::Result<Meter> {
        let ticks = rustix::param::clock_ticks_per_second();
        // Opening is the permission check (ptrace read access); reading walks every page
        // table of the process (~0.3 ms for a forked R), so only a baseline may read it.
        // Only a refusal falls back to counters: a server out of descriptors is not a
        // reason to meter with less (its error goes up as it is, and is told as capacity).
        let accounting = match fs::File::open(format!("/proc/{leader}/smaps_rollup")) {
            Ok(_) => MemoryAccounting::Pss,
            Err(e) if out_of_descriptors(&e) => return Err(e),
            Err(_) => MemoryAccounting::Rss,
        };
        // Out of descriptors goes up as it is; any other failure to open is said in words.
        let open = |path: String, said: &dyn Fn(io::Error) -> io::Error| {
            fs::File::open(path).map_err(|e| if out_of_descriptors(&e) { e } else { said(e) })
        };
        // /proc hides other users' processes (hidepid) or is not this pid namespace's.
        let invisible = || io::Error::other(format!("process group {leader} is not visible in /proc"));
        let leader_stat = open(format!("/proc/{leader}/stat"), &|_| invisible())?;
        // A kernel without CONFIG_PROC_CHILDREN has no such file: no sandbox could tell
        // whether R is alone, so none is made (fail closed).
        let leader_children = open(format!("/proc/{leader}/task/{leader}/children"), &|e| {
            io::Error::other(format!("cannot read the children of process {leader} in /proc: {e}"))
        })?;
        let mut meter = Meter {
            pgid: leader,
            accounting,
            baseline: 0,
            ticks_per_ms: ticks.max(1) as f64 / 1000.0,
            reaped_ticks: std::cell::Cell::new(0),
            leader_stat,
            leader_children,
            walked: std::cell::Cell::new(None),
        };
        // The group is the leader alone now (it has not forked): read it, no scan.
        let stat = read_from_start(&meter.leader_stat).ok().and_then(|t| Stat::parse(&t)).filter(|s| s.pgid == leader);
        let Some(stat) = stat else { return Err(invisible()) };
        meter.reaped_ticks.set(stat.children_ticks);
        meter.baseline = baseline(&meter)?;
        Ok(meter)
    }

    /// How memory is read.
    pub fn accounting(&self) -> MemoryAccounting {
        self.accounting
    }

    /// Memory the code added over the baseline, in a sample.
    pub fn added_memory(&self, sample: &Sample) -> u64 {
        sample.memory.saturating_sub(self.baseline)
    }

    /// Whether the sandbox is, or was since the last look, more than its leader: any
    /// thread of the leader has a child, or the leader reaped one in between (its
    /// `cutime + cstime` grew). Every other process of the sandbox is a descendant of the
    /// leader, and the leader is a child subreaper, so while any exists the leader has a
    /// child (orphans are reparented to it; seccomp forbids `CLONE_PARENT`, which would
    /// make a sibling); and a child that lived between two looks left its CPU in the
    /// leader's `cutime` when reaped. A leader that is gone has none.
    ///
    /// A leader of one thread (R, unless native code started threads) is two reads of
    /// files held open. The children of a thread that exits pass to a live thread of its
    /// process, so with one thread left its `children` lists them all.
    pub fn has_company(&self) -> io::Result<bool> {
        let threads = match read_from_start(&self.leader_stat) {
            Ok(text) => {
                let stat = Stat::parse(&text);
                let reaped = stat.map_or(0, |s| s.children_ticks);
                if reaped > self.reaped_ticks.replace(reaped) {
                    return Ok(true);
                }
                stat.map(|s| s.threads)
            }
            Err(e) if gone(&e) => return Ok(false),
            Err(e) => return Err(e),
        };
        if threads == Some(1) {
            return match first_bytes(&self.leader_children) {
                Ok(listed) => Ok(listed),
                Err(e) if gone(&e) => Ok(false),
                Err(e) => Err(e),
            };
        }
        let tasks = match fs::read_dir(format!("/proc/{}/task", self.pgid)) {
            Ok(tasks) => tasks,
            Err(e) if gone(&e) => return Ok(false),
            Err(e) => return Err(e),
        };
        for task in tasks {
            let task = task?;
            match read_proc(task.path().join("children")) {
                Ok(children) if !children.trim().is_empty() => return Ok(true),
                Ok(_) => {}
                // A thread that exited since the directory was read.
                Err(e) if gone(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    /// The members of the group other than its leader.
    pub fn others(&self) -> io::Result<Vec<i32>> {
        Ok(self.members()?.into_iter().filter(|(pid, _)| *pid != self.pgid).map(|(pid, _)| pid).collect())
    }

    /// Read every member: CPU always, memory as [`WALK_SHARE`] allows unless `fresh`.
    pub fn sample(&self, fresh: bool) -> io::Result<Sample> {
        let members = self.members()?;
        let cpu_ticks: u64 = members.iter().map(|(_, stat)| stat.cpu_ticks).sum();
        // A member that died since the walk has no memory left to count; any other
        // failure to read one fails the sample (a member not counted is memory let through).
        let total = || -> io::Result<u64> {
            let mut sum = 0;
            for (pid, _) in &members {
                sum += match self.memory_of(*pid) {
                    Ok(memory) => memory,
                    Err(e) if gone(&e) => 0,
                    Err(e) => return Err(e),
                };
            }
            Ok(sum)
        };
        let memory = match self.accounting {
            MemoryAccounting::Rss => total()?,
            MemoryAccounting::Pss => match self.walked.get() {
                Some((memory, due)) if !fresh && Instant::now() < due => memory,
                _ => {
                    let start = Instant::now();
                    let memory = total()?;
                    let took = start.elapsed();
                    let gap = (took * WALK_SHARE).clamp(INTERVAL, MAX_WALK_GAP);
                    self.walked.set(Some((memory, Instant::now() + gap)));
                    memory
                }
            },
        };
        Ok(Sample { cpu_ms: (cpu_ticks as f64 / self.ticks_per_ms) as u64, memory, processes: members.len() as u32 })
    }

    fn memory_of(&self, pid: i32) -> io::Result<u64> {
        match self.accounting {
            MemoryAccounting::Pss => match proportional_of(pid) {
                // A member that made itself non-dumpable (`PR_SET_DUMPABLE`) hides its
                // page tables from a supervisor without CAP_SYS_PTRACE: its resident
                // memory, counters anyone may read, counts instead (no less than its PSS).
                // Counting it as nothing, as a failed read once did, let it through.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => resident_of(pid),
                read => read,
            },
            MemoryAccounting::Rss => resident_of(pid),
        }
    }

    /// Every process whose group is this sandbox's: the leader and its descendants (every
    /// member is one: see [`Meter::has_company`]), found through each thread's `children`
    /// and each kept only while its group is still this one. Not a pass over all of
    /// `/proc`: a sandbox with children is sampled every [`INTERVAL`] for as long as its
    /// request runs, and a scan of every process on the host made that a large part of
    /// a core. A process that exits during the walk and leaves its children to the
    /// leader may hide them from this one sample; the next finds them.
    fn members(&self) -> io::Result<Vec<(i32, Stat)>> {
        let mut found = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut next = vec![self.pgid];
        while let Some(pid) = next.pop() {
            if !seen.insert(pid) {
                continue;
            }
            // Gone since its parent listed it: not a member any more.
            let text = match read_proc(format!("/proc/{pid}/stat")) {
                Ok(text) => text,
                Err(e) if gone(&e) => continue,
                Err(e) => return Err(e),
            };
            let Some(stat) = Stat::parse(&text) else { continue };
            if stat.pgid != self.pgid {
                continue;
            }
            found.push((pid, stat));
            next.extend(children_of(pid)?);
        }
        Ok(found)
    }
}

/// Whether a read of `/proc` failed because the process (or thread) is gone: the one
/// failure the meter passes over. Any other (the server out of descriptors, above all)
/// fails the reading, which stops the sandbox: a member not seen is a member not counted.
fn gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH))
}

/// The children of every thread of `pid` (none when it is gone).
fn children_of(pid: i32) -> io::Result<Vec<i32>> {
    let tasks = match fs::read_dir(format!("/proc/{pid}/task")) {
        Ok(tasks) => tasks,
        Err(e) if gone(&e) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    for task in tasks {
        let children = match task.and_then(|task| read_proc(task.path().join("children"))) {
            Ok(children) => children,
            // A thread that exited since the directory was read.
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(e),
        };
        found.extend(children.split_whitespace().filter_map(|c| c.parse::<i32>().ok()));
    }
    Ok(found)
}

/// A file of `/proc`, read in as few system calls as its size allows. `fs::read_to_string`
/// first asks for the size (0 in `/proc`), then reads from 32 bytes up: nine calls for a
/// stat line, read for every member at every sample of the meter.
fn read_proc(path: impl AsRef<std::path::Path>) -> io::Result<String> {
    read_text(&fs::File::open(path)?, false)
}

/// A line file of `/proc` held open (`stat`), read again from its start: `/proc`
/// makes its text anew for a read at offset 0. Read until the line's newline (one call
/// for a stat line), or the end.
fn read_from_start(file: &fs::File) -> io::Result<String> {
    read_text(file, true)
}

/// A file of `/proc` from its start to its end, or to its first newline (`line`).
fn read_text(file: &fs::File, line: bool) -> io::Result<String> {
    use std::os::unix::fs::FileExt;
    let mut text = Vec::new();
    let mut chunk = [0u8; 4096];
    while !(line && text.last() == Some(&b'\n')) {
        match file.read_at(&mut chunk, text.len() as u64) {
            Ok(0) => break,
            Ok(n) => text.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Whether a file of `/proc` held open (a thread's `children`) has any text now: one
/// read from its start, of one byte at most.
fn first_bytes(file: &fs::File) -> io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let mut byte = [0u8; 1];
    loop {
        match file.read_at(&mut byte, 0) {
            Ok(n) => return Ok(n > 0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// `Pss_Anon + Pss_Shmem` of a process, bytes: a walk of its page tables.
fn proportional_of(pid: i32) -> io::Result<u64> {
    kilobytes(&format!("/proc/{pid}/smaps_rollup"), ["Pss_Anon:", "Pss_Shmem:"])
}

/// `RssAnon + RssShmem` of a process, bytes: counters.
fn resident_of(pid: i32) -> io::Result<u64> {
    kilobytes(&format!("/proc/{pid}/status"), ["RssAnon:", "RssShmem:"])
}

fn kilobytes(path: &str, fields: [&str; 2]) -> io::Result<u64> {
    let text = read_proc(path)?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let rest = fields.iter().find_map(|f| line.strip_prefix(f))?;
            rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok()
        })
        .sum::<u64>()
        * 1024)
}

/// How long a reading of the zygote's [`PssShare`] is used, for one number of children.
const SHARE_FRESH: Duration = Duration::from_secs(1);

/// A fresh sandbox's PSS from counters. Reading a forked R's PSS walks its page tables
/// (~0.3 ms of the supervisor's CPU, a fifteenth of a whole fresh evaluation's), and
/// every sandbox needs one, as its meter's baseline. A child just made maps the same
/// pages as the zygote, each shared by the same processes, so its PSS is its resident
/// memory (a counter) times the zygote's PSS per resident byte. That ratio depends on how
/// many children share the pages: it is read (one walk of the zygote) per number of
/// children the zygote has, at most once a [`SHARE_FRESH`]. Measured against a walk of
/// the child with 1 to 60 sessions open: within 0.13 MB, and below it (the child's few
/// private pages count at the ratio, not in full), so the code is counted more, not less.
#[derive(Debug)]
pub struct PssShare {
    zygote: i32,
    /// (children of the zygote, ratio, read at).
    readings: std::sync::Mutex<Vec<(usize, f64, std::time::Instant)>>,
}

impl PssShare {
    /// The share of the zygote whose pid is `zygote`.
    pub fn of_zygote(zygote: i32) -> PssShare {
        PssShare { zygote, readings: std::sync::Mutex::new(Vec::new()) }
    }

    /// The zygote's PSS per resident byte now.
    fn ratio(&self) -> io::Result<f64> {
        let z = self.zygote;
        let children = read_proc(format!("/proc/{z}/task/{z}/children"))?.split_whitespace().count();
        let mut readings = self.readings.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        readings.retain(|(_, _, at)| now.duration_since(*at) < SHARE_FRESH);
        if let Some((_, ratio, _)) = readings.iter().find(|(n, _, _)| *n == children) {
            return Ok(*ratio);
        }
        let resident = resident_of(z)?;
        if resident == 0 {
            return Err(io::Error::other(format!("the zygote {z} shows no resident memory")));
        }
        let ratio = (proportional_of(z)? as f64 / resident as f64).min(1.0);
        readings.push((children, ratio, now));
        Ok(ratio)
    }
}

/// The fields of `/proc/PID/stat` the meter reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stat {
    pgid: i32,
    /// utime + stime + cutime + cstime, in clock ticks.
    cpu_ticks: u64,
    /// cutime + cstime: the CPU of the children it reaped.
    children_ticks: u64,
    /// Threads of the process (`num_threads`).
    threads: u32,
}

impl Stat {
    /// Parse a stat line. The command name (field 2) may hold spaces and parentheses,
    /// so fields are counted from its last `)`.
    fn parse(text: &str) -> Option<Stat> {
        let rest = &text[text.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // After the name: state(3) ppid(4) pgrp(5) ... utime(14) stime(15) cutime(16)
        // cstime(17) ... num_threads(20).
        let field = |n: usize| fields.get(n - 3).copied();
        let pgid = field(5)?.parse().ok()?;
        let ticks = |n: usize| field(n).and_then(|f| f.parse::<i64>().ok()).map(|v| v.max(0) as u64);
        let children_ticks = ticks(16)? + ticks(17)?;
        let threads = field(20)?.parse().ok()?;
        Some(Stat { pgid, cpu_ticks: ticks(14)? + ticks(15)? + children_ticks, children_ticks, threads })
    }
}

/// Stop every member of the group at once (SIGSTOP to the group: the kernel signals
/// the whole group in one step, so a process that forks or exits meanwhile cannot slip
/// past it, as a chain could between the reads of a pid list). What a request left
/// running is then killed while it cannot run, and R itself (with any thread native code
/// started in it) stays stopped until the next request: between requests nothing of the
/// sandbox runs.
pub fn stop_group(meter: &Meter) -> io::Result<()> {
    // The group whose leader is our child R: its id stays reserved while the leader
    // exists (we hold its pidfd, so it is not reaped).
    let group = rustix::process::Pid::from_raw(meter.pgid).ok_or_else(|| io::Error::other("no process group"))?;
    Ok(rustix::process::kill_process_group(group, rustix::process::Signal::STOP)?)
}

/// Kill every member of the group but its leader (what a session's R left running
/// after a request). Each is opened as a pidfd and checked to still be a member before
/// the signal, so a pid reused by another process in between is never signalled.
pub fn kill_others(meter: &Meter) -> io::Result<usize> {
    let mut killed = 0;
    for pid in meter.others()? {
        let Some(member) = rustix::process::Pid::from_raw(pid) else { continue };
        let fd = match rustix::process::pidfd_open(member, rustix::process::PidfdFlags::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::SRCH) => continue, // gone already
            Err(e) => return Err(e.into()),
        };
        let still_member = match read_proc(format!("/proc/{pid}/stat")) {
            Ok(text) => Stat::parse(&text).is_some_and(|s| s.pgid == meter.pgid),
            Err(e) if gone(&e) => false,
            Err(e) => return Err(e),
        };
        if still_member && rustix::process::pidfd_send_signal(&fd, rustix::process::Signal::KILL).is_ok() {
            killed += 1;
        }
    }
    Ok(killed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe for a forked test process: (read end, write end).
    fn pipe() -> (i32, i32) {
        let mut fds = [0; 2];
        // SAFETY: pipe fills the two fds.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        (fds[0], fds[1])
    }

    /// A child of ours leading a process group of its own, waiting to be killed (by the
    /// caller, who reaps it).
    fn waiting_group_leader() -> i32 {
        // SAFETY: the child only sets its group and waits; no locks are taken after fork.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: a new group for the child, which then waits to be killed.
            unsafe {
                libc::setpgid(0, 0);
                libc::pause();
                libc::_exit(0)
            };
        }
        // SAFETY: putting the child in its own group (races the child's own call harmlessly).
        unsafe { libc::setpgid(pid, pid) };
        pid
    }

    #[test]
    fn stat_lines_parse_past_hostile_command_names() {
        let line = "1234 (a) b (c) 5 6) S 1 777 777 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 1 0 100 0 0";
        assert_eq!(Stat::parse(line), Some(Stat { pgid: 777, cpu_ticks: 310, children_ticks: 10, threads: 1 }));
        assert_eq!(Stat::parse("garbage"), None);
    }

    #[test]
    fn a_fresh_childs_baseline_from_counters_is_its_pss_or_a_little_less() {
        // A "zygote" (a process of its own, so the test's threads are not in it) that
        // touches 32 MiB and forks a child; both wait. The child's baseline estimated
        // from counters and the zygote's ratio, against a walk of its page tables.
        let (go_r, go_w) = pipe();
        // SAFETY: the forked processes call only mmap, memset, fork, setpgid, write and pause
        // (no allocation, no lock) and are killed below.
        let zygote = unsafe { libc::fork() };
        if zygote == 0 {
            // SAFETY: as above: the forked copy makes no allocation and takes no lock.
            unsafe {
                let size = 32 << 20;
                let heap = libc::mmap(
                    std::ptr::null_mut(),
                    size,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                libc::memset(heap, 7, size);
                let child = libc::fork();
                if child == 0 {
                    libc::setpgid(0, 0);
                    libc::pause();
                    libc::_exit(0);
                }
                // A group of its own, as a sandbox's (both sides: no race).
                libc::setpgid(child, child);
                libc::write(go_w, (&child as *const i32).cast(), 4);
                libc::pause();
                libc::_exit(0);
            }
        }
        let mut child = 0i32;
        // SAFETY: reading 4 bytes into an i32 from our pipe.
        assert_eq!(unsafe { libc::read(go_r, (&mut child as *mut i32).cast(), 4) }, 4);
        let share = PssShare::of_zygote(zygote);
        let estimated = Meter::for_child(child, &share).map(|m| m.baseline);
        let walked = Meter::new(child).map(|m| (m.baseline, m.accounting));
        // SAFETY: killing and reaping our own processes, closing our pipe.
        unsafe {
            libc::kill(child, libc::SIGKILL);
            libc::kill(zygote, libc::SIGKILL);
            libc::waitpid(zygote, std::ptr::null_mut(), 0);
            libc::close(go_r);
            libc::close(go_w);
        }
        let (estimated, (walked, accounting)) = (estimated.unwrap(), walked.unwrap());
        assert_eq!(accounting, MemoryAccounting::Pss, "our own children's smaps_rollup is readable");
        // The 32 MiB are shared by two: ~16 MiB each.
        assert!(walked > 15 << 20, "walked {walked}");
        assert!(estimated <= walked && estimated + (1 << 20) > walked, "estimated {estimated}, walked {walked}");
    }

    #[test]
    fn a_child_reaped_between_two_looks_is_company() {
        // A leader in a group of its own that makes one child burning ~200 ms of CPU,
        // reaps it, then waits to be killed.
        let (go_r, go_w) = pipe();
        // SAFETY: the child only forks, spins, waits and reads a pipe; it is killed below.
        let leader = unsafe { libc::fork() };
        if leader == 0 {
            // SAFETY: plain calls in the forked child; it never returns.
            unsafe {
                libc::setpgid(0, 0);
                let mut byte = 0u8;
                libc::read(go_r, (&mut byte as *mut u8).cast(), 1);
                let worker = libc::fork();
                if worker == 0 {
                    let start = std::time::Instant::now();
                    while start.elapsed() < Duration::from_millis(200) {}
                    libc::_exit(0);
                }
                libc::waitpid(worker, std::ptr::null_mut(), 0);
                libc::pause();
                libc::_exit(0);
            }
        }
        // SAFETY: as in the test below.
        unsafe { libc::setpgid(leader, leader) };
        let meter = Meter::new(leader).unwrap();
        assert!(!meter.has_company().unwrap(), "alone before it forks");
        // SAFETY: one byte to our own pipe.
        unsafe { libc::write(go_w, b"g".as_ptr().cast(), 1) };
        // Not looking while the worker lives: wait (reading the leader's stat directly)
        // until the leader has reaped it.
        let reaped = || {
            read_proc(format!("/proc/{leader}/stat")).ok().and_then(|t| Stat::parse(&t)).map_or(0, |s| s.children_ticks)
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while reaped() == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let worker_reaped = reaped() > 0;
        let seen = meter.has_company().unwrap();
        let again = meter.has_company().unwrap();
        // SAFETY: killing and reaping our own child; closing our pipe.
        unsafe {
            libc::kill(leader, libc::SIGKILL);
            libc::waitpid(leader, std::ptr::null_mut(), 0);
            libc::close(go_r);
            libc::close(go_w);
        }
        assert!(worker_reaped, "the worker was not reaped within 20 s");
        assert!(seen, "a worker that lived and was reaped between two looks is company");
        assert!(!again, "once its CPU has been seen, a reaped child is no company");
    }

    /// The fork of a thread that is not the leader's main thread is company, while that
    /// thread lives (found through its own `children`) and after it exits (its child is
    /// the main thread's then, read from the file held open).
    #[test]
    fn a_child_of_another_thread_is_company_before_and_after_that_thread_ends() {
        extern "C" fn forking_thread(pipes: *mut libc::c_void) -> *mut libc::c_void {
            // SAFETY: `pipes` points at the leader's two fds, alive for the leader's life;
            // the thread only forks, writes, reads, and the grandchild only pauses.
            unsafe {
                let [forked_w, end_r] = *(pipes as *const [i32; 2]);
                if libc::fork() == 0 {
                    libc::pause();
                    libc::_exit(0);
                }
                libc::write(forked_w, b"f".as_ptr().cast(), 1);
                let mut byte = 0u8;
                libc::read(end_r, (&mut byte as *mut u8).cast(), 1);
            }
            std::ptr::null_mut()
        }
        let (forked_r, forked_w) = pipe();
        let (end_r, end_w) = pipe();
        // SAFETY: the leader starts one thread (glibc resets its allocator and stack
        // locks in a forked child), then waits to be killed with its group below.
        let leader = unsafe { libc::fork() };
        if leader == 0 {
            // SAFETY: as above; `pipes` outlives the thread (the leader never returns).
            unsafe {
                libc::setpgid(0, 0);
                let pipes = [forked_w, end_r];
                let mut thread: libc::pthread_t = 0;
                libc::pthread_create(&mut thread, std::ptr::null(), forking_thread, pipes.as_ptr() as *mut _);
                libc::pthread_join(thread, std::ptr::null_mut());
                libc::pause();
                libc::_exit(0);
            }
        }
        // SAFETY: as in the tests above.
        unsafe { libc::setpgid(leader, leader) };
        let meter = Meter::new(leader).unwrap();
        let mut byte = 0u8;
        // SAFETY: reading one byte of our own pipe.
        let forked = unsafe { libc::read(forked_r, (&mut byte as *mut u8).cast(), 1) } == 1;
        let threads =
            || read_proc(format!("/proc/{leader}/stat")).ok().and_then(|t| Stat::parse(&t)).map(|s| s.threads);
        let while_thread_lives = (threads(), meter.has_company().unwrap());
        // SAFETY: one byte to our own pipe: the thread ends.
        unsafe { libc::write(end_w, b"e".as_ptr().cast(), 1) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while threads() != Some(1) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let after_thread_ended = (threads(), meter.has_company().unwrap());
        // SAFETY: killing the test's own group (leader and grandchild) and reaping the leader.
        unsafe {
            libc::kill(-leader, libc::SIGKILL);
            libc::waitpid(leader, std::ptr::null_mut(), 0);
            for fd in [forked_r, forked_w, end_r, end_w] {
                libc::close(fd);
            }
        }
        assert!(forked, "the thread forked");
        assert_eq!(while_thread_lives, (Some(2), true), "(threads, company) while the forking thread lives");
        assert_eq!(after_thread_ended, (Some(1), true), "(threads, company) once only the main thread is left");
    }

    /// With PSS, a second sample right after a walk reuses its memory (the walk is
    /// not due yet) while reading CPU and members again; a request's last sample walks.
    #[test]
    fn memory_is_walked_again_only_when_due_or_asked() {
        let pid = waiting_group_leader();
        let meter = Meter::new(pid).unwrap();
        let before = Instant::now();
        let first = meter.sample(false).map(|s| (s.processes, meter.walked.get()));
        let second = meter.sample(false).map(|s| (s.processes, meter.walked.get()));
        let after_second = Instant::now();
        let last = meter.sample(true).map(|_| meter.walked.get());
        // SAFETY: killing and reaping our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        if meter.accounting == MemoryAccounting::Rss {
            return; // counters only: nothing is walked, nothing budgeted
        }
        let (first, second, last) = (first.unwrap(), second.unwrap(), last.unwrap());
        let (_, due) = first.1.expect("the first sample walks");
        assert!(due >= before + INTERVAL, "the next walk is at least an interval away");
        assert!(due <= Instant::now() + MAX_WALK_GAP, "and never more than the longest gap");
        // (A host so busy that the second sample came after the due time walked again.)
        if after_second < due {
            assert_eq!(second, first, "not due: the same walk, the same members");
        }
        assert!(last.unwrap().1 > due, "the last sample of a request walks afresh");
    }

    /// A member that makes itself non-dumpable hides its page tables (`smaps_rollup`)
    /// from a reader without capabilities (a supervisor run by a user; here this test's
    /// thread, which drops its effective set): its resident memory counts instead, not
    /// nothing.
    #[test]
    fn a_member_that_hides_its_page_tables_counts_by_its_resident_memory() {
        use rustix::thread::{capabilities, set_capabilities, CapabilitySet, CapabilitySets};
        // (CAP_SYS_PTRACE alone dropped is not enough for root: the effective set goes.)
        let (go_r, go_w) = pipe();
        // SAFETY: the forked processes call only fork, setpgid, prctl, mmap, memset,
        // write and pause (no allocation, no lock) and are killed below.
        let leader = unsafe { libc::fork() };
        if leader == 0 {
            // As a sandbox's processes: no capabilities (which a reader without them could
            // not read /proc files of, dumpable or not).
            let none = CapabilitySet::empty();
            let dropped =
                set_capabilities(None, CapabilitySets { effective: none, permitted: none, inheritable: none });
            // SAFETY: as above.
            unsafe {
                if dropped.is_err() {
                    libc::_exit(1);
                }
                libc::setpgid(0, 0);
                let member = libc::fork();
                if member == 0 {
                    libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
                    let size = 16 << 20;
                    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
                    let heap = libc::mmap(std::ptr::null_mut(), size, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0);
                    libc::memset(heap, 7, size);
                    libc::write(go_w, [1u8].as_ptr().cast(), 1);
                    libc::pause();
                    libc::_exit(0);
                }
                libc::pause();
                libc::_exit(0);
            }
        }
        // SAFETY: putting the child in its own group (races the child's own call harmlessly).
        unsafe { libc::setpgid(leader, leader) };
        let mut byte = 0u8;
        // SAFETY: reading one byte from our pipe: the member has touched its memory.
        assert_eq!(unsafe { libc::read(go_r, (&mut byte as *mut u8).cast(), 1) }, 1);
        // Capabilities are the thread's: this thread reads /proc as a user would.
        let held = capabilities(None).unwrap();
        let mut without = held;
        without.effective = CapabilitySet::empty();
        set_capabilities(None, without).unwrap();
        let reading = Meter::new(leader).and_then(|meter| Ok((meter.accounting, meter.sample(true)?)));
        set_capabilities(None, held).unwrap();
        // SAFETY: killing our own group, reaping its leader, closing our pipe.
        unsafe {
            libc::kill(-leader, libc::SIGKILL);
            libc::waitpid(leader, std::ptr::null_mut(), 0);
            libc::close(go_r);
            libc::close(go_w);
        }
        let (accounting, sample) = reading.unwrap();
        assert_eq!(accounting, MemoryAccounting::Pss, "the leader's page tables are readable");
        assert_eq!(sample.processes, 2, "{sample:?}");
        assert!(sample.memory >= 16 << 20, "the member's 16 MiB count: {sample:?}");
    }

    #[test]
    fn a_spinning_child_counts_in_its_group() {
        // SAFETY: the child only spins and is killed below; no locks are taken after fork.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: a new group for the child; it never returns from the loop.
            unsafe { libc::setpgid(0, 0) };
            #[allow(clippy::empty_loop)]
            loop {}
        }
        // SAFETY: putting the child in its own group (races the child's own call harmlessly).
        unsafe { libc::setpgid(pid, pid) };
        let meter = Meter::new(pid).unwrap();
        // Until the child has been scheduled for 100 ms of CPU (however busy the host).
        let mut sample = meter.sample(false).unwrap();
        for _ in 0..400 {
            if sample.cpu_ms >= 100 {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
            sample = meter.sample(false).unwrap();
        }
        // SAFETY: killing and reaping our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        assert_eq!(sample.processes, 1);
        assert!(sample.cpu_ms >= 100, "{sample:?}");
        assert!(sample.memory > 0, "{sample:?}");
        assert!(Meter::new(pid).is_err(), "a group that is gone cannot be metered");
    }

    /// Out of descriptors, the meter fails with the server's own error (EMFILE), which the
    /// engine tells as capacity, at every point: never a fall back to counters, a member
    /// passed over as gone, or a setup failure (a CI run of the protocol test met the
    /// last). Each free descriptor more lets it one file further. Rlimits are the whole
    /// process's, so this runs in a copy of the test binary with this test alone.
    #[test]
    fn out_of_descriptors_every_reading_fails_with_the_servers_error() {
        const ALONE: &str = "RSANDBOX_METER_TEST_ALONE";
        if std::env::var_os(ALONE).is_none() {
            let name = "meter::tests::out_of_descriptors_every_reading_fails_with_the_servers_error";
            let run = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", name, "--test-threads=1", "--nocapture"])
                .env(ALONE, "1")
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&run.stdout) + String::from_utf8_lossy(&run.stderr);
            assert!(run.status.success() && said.contains("1 passed"), "{said}");
            return;
        }
        let pid = waiting_group_leader();
        // The limit bounds the numbers of descriptors, not their count: the limit that
        // leaves `free` numbers unused is the next unused number after those. (The
        // listing's own descriptor takes the lowest free number, as the probe's did.)
        let probe = std::fs::File::open("/dev/null").unwrap();
        let listing = std::os::fd::AsRawFd::as_raw_fd(&probe).to_string();
        drop(probe);
        let used: Vec<u64> = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|fd| *fd != listing)
            .map(|fd| fd.parse().unwrap())
            .collect();
        let leaving = |free: usize| (0u64..).filter(|fd| !used.contains(fd)).nth(free).unwrap();
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        let mut failures = Vec::new();
        for free in 0..=3 {
            let lowered = rustix::process::Rlimit { current: Some(leaving(free)), maximum: limit.maximum };
            rustix::process::setrlimit(rustix::process::Resource::Nofile, lowered).unwrap();
            let reading = Meter::new(pid).and_then(|meter| meter.sample(true));
            rustix::process::setrlimit(rustix::process::Resource::Nofile, limit).unwrap();
            match reading {
                Err(e) if e.raw_os_error() == Some(libc::EMFILE) => {}
                other => failures.push(format!("{free} free: {other:?}")),
            }
        }
        let whole = Meter::new(pid).and_then(|meter| meter.sample(true));
        // SAFETY: killing and reaping our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        assert!(failures.is_empty(), "{failures:#?}");
        assert!(whole.is_ok(), "with the limit back: {whole:?}");
    }
}
