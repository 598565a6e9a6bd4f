//! How long installing the seccomp program takes in a freshly forked child (the kernel
//! checks and JIT-compiles it then): median and 90th percentile of 200 forks, and the
//! program's size. A measurement to print, never a test.
//!
//! `cargo run --release -p lockdown --example seccomp_install_time`

use lockdown::{SeccompFilters, SeccompProfile};
use std::io::Read;
use std::os::fd::FromRawFd;
use std::time::Instant;

fn main() {
    let built = Instant::now();
    let filters = SeccompFilters::build(SeccompProfile {
        exec: false,
        network: false,
        observe: false,
        private_root: false,
        report_network: false,
    })
    .expect("the program builds");
    println!("seccomp build (both variants of one profile): {:.3} ms", built.elapsed().as_secs_f64() * 1000.0);
    let mut samples = Vec::new();
    for _ in 0..200 {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two pipe ends.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: this example runs no other thread, so the child may run any code.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let start = Instant::now();
            let ok = filters.install(None).is_ok();
            let micros = if ok { start.elapsed().as_nanos() as u64 } else { u64::MAX };
            // SAFETY: writing 8 bytes from a local to our pipe end, then leaving at once.
            unsafe {
                libc::write(fds[1], (&micros as *const u64).cast(), 8);
                libc::_exit(0);
            }
        }
        // SAFETY: closing our copy of the write end; the read end becomes a File we own.
        let mut reader = unsafe {
            libc::close(fds[1]);
            std::fs::File::from_raw_fd(fds[0])
        };
        let mut buf = [0u8; 8];
        reader.read_exact(&mut buf).expect("the child reports");
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        let nanos = u64::from_ne_bytes(buf);
        assert_ne!(nanos, u64::MAX, "install failed");
        samples.push(nanos as f64 / 1000.0);
    }
    samples.sort_by(f64::total_cmp);
    if let Some((mean, max)) = filters.instructions_per_call() {
        println!("instructions run per listed call: mean {mean:.1}, max {max}");
    }
    println!(
        "seccomp install: median {:.1} us, p90 {:.1} us over {} forks; program {} instructions",
        samples[samples.len() / 2],
        samples[samples.len() * 9 / 10],
        samples.len(),
        filters.instruction_count()
    );
}
