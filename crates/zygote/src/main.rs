//! `rsandbox-zygote`: embeds R once, then forks one locked-down child per evaluation.
//!
//! Started by the supervisor (never by hand) with a clean environment and its end of a
//! seqpacket channel on fd 3. Runs no thread besides R's own main thread and never runs
//! user code itself: it only forks. See DESIGN.md, "The three processes".

mod embedded_r;
mod r_api;
mod r_directories;
mod r_values;
mod request_values;
mod sandbox_child;
mod tool_calls;
mod workspace_files;
mod zygote_process;

use std::os::fd::{FromRawFd, OwnedFd};
use wire::zygote_link::SupervisorLink;

/// The fd on which the supervisor hands us our channel.
const CHANNEL_FD: i32 = 3;

fn main() {
    let (preload, warm) = parse_args(std::env::args().skip(1).collect());
    // One malloc arena for every thread. glibc gives each thread that allocates an arena
    // of its own, reserving 64 MiB of address space (PROT_NONE) that later grows in place;
    // pango's short-lived font threads (plot warm-up) left two such reservations in the
    // zygote, inside the address space every child's memory limit starts from. When R's
    // main arena hit RLIMIT_AS, malloc retried in those arenas, so code got ~64 MiB more
    // than its limit on every pre-forked path. With one arena nothing is reserved.
    // SAFETY: called before any other thread exists; mallopt only sets a malloc parameter.
    if unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) } != 1 {
        eprintln!("rsandbox-zygote: mallopt(M_ARENA_MAX, 1) failed");
        std::process::exit(1);
    }
    if std::env::var_os("R_HOME").is_none() {
        // SAFETY: no other thread exists yet.
        unsafe { std::env::set_var("R_HOME", env!("RSANDBOX_R_HOME")) };
    }
    let r_home = std::env::var_os("R_HOME").map(std::path::PathBuf::from).unwrap_or_default();
    for (name, dir) in r_directories::of_installed_r(&r_home) {
        if std::env::var_os(name).is_none() {
            // SAFETY: no other thread exists yet.
            unsafe { std::env::set_var(name, dir) };
        }
    }
    // SAFETY: fd 3 is the channel the supervisor passed us; nothing else owns it.
    let link = SupervisorLink::from_fd(unsafe { OwnedFd::from_raw_fd(CHANNEL_FD) });
    // No PR_SET_PDEATHSIG here: it fires when the *thread* that spawned us exits, and
    // library users start engines from short-lived threads. A dead supervisor closes the
    // channel instead, and serve() then kills every child and exits.
    match zygote_process::start(&preload, warm) {
        Ok((r, ready)) => {
            or_exit(link.announce_ready(ready));
            zygote_process::serve(&link, &r)
        }
        Err(error) => {
            or_exit(link.report_start_failed(error));
            std::process::exit(1)
        }
    }
}

/// `[--preload pkg1,pkg2] [--no-warm]`.
fn parse_args(args: Vec<String>) -> (Vec<String>, bool) {
    let (mut preload, mut warm) = (Vec::new(), true);
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.len()) {
            ("--preload", n) if n > 0 => {
                let list = args.next().unwrap_or_default();
                preload = list.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect();
            }
            ("--no-warm", _) => warm = false,
            _ => {
                eprintln!(
                    "usage: rsandbox-zygote [--preload pkg1,pkg2] [--no-warm] (started by rsandbox, fd 3 = channel)"
                );
                std::process::exit(2)
            }
        }
    }
    (preload, warm)
}

/// After a failed send to the supervisor: it has gone away, so there is nothing left to
/// do (its end closing also makes `serve` kill every child).
pub fn or_exit(sent: Result<(), wire::WireError>) {
    if sent.is_err() {
        std::process::exit(0);
    }
}
