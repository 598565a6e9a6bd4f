//! Run a command under a lockdown policy: `sandboxer WORKSPACE CMD [ARGS...]`.
//!
//! The command may read the system's libraries and binaries, write only WORKSPACE,
//! execute only itself (and its ELF interpreter), and reach no network. As root it runs
//! as uid/gid 65534. Prints how it ended.

use lockdown::{Identity, Limits, Policy};
use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [workspace, program, rest @ ..] = args.as_slice() else {
        eprintln!("usage: sandboxer WORKSPACE CMD [ARGS...]");
        std::process::exit(2);
    };
    let program = PathBuf::from(program);
    let mut executable = vec![program.clone()];
    executable.extend(
        ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .filter_map(|p| p.canonicalize().ok()),
    );
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let policy = Policy {
        read_only: ["/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache"].iter().map(PathBuf::from).collect(),
        read_write: vec![PathBuf::from(workspace), PathBuf::from("/dev/null")],
        executable,
        limits: Limits { cpu_seconds: Some(10), processes: Some(32), open_files: Some(64), ..Limits::default() },
        run_as: root.then_some(Identity { uid: 65534, gid: 65534 }),
        ..Policy::default()
    };
    let mut argv = vec![program.display().to_string()];
    argv.extend(rest.iter().cloned());
    let env = vec![("PATH".to_string(), "/usr/bin:/bin".to_string())];
    match lockdown::command::spawn(&policy, &program, &argv, &env, None, None) {
        Ok(spawned) => {
            // Not watched here: with the listener closed, any later exec fails (ENOSYS)
            // instead of being reported.
            let pid = spawned.pid;
            drop(spawned.violations);
            let mut status = 0;
            // SAFETY: waiting for our own child with a valid status pointer.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            if libc::WIFSIGNALED(status) {
                println!("killed by signal {}", libc::WTERMSIG(status));
            } else {
                println!("exited with status {}", libc::WEXITSTATUS(status));
            }
        }
        Err(e) => {
            eprintln!("sandboxer: {e}");
            std::process::exit(1);
        }
    }
}
