//! Link the unwinder into the `rsandbox` binary instead of loading `libgcc_s.so.1`.
//!
//! Every rsandbox command starts this binary, so its process start is the floor under
//! `rsandbox exec` (bench P6). Rust's standard library asks for the unwinder as
//! `-lgcc_s`; the shared `libgcc_s.so.1` runs a constructor (`__cpu_indicator_init`)
//! that executes `cpuid` twelve times, and in a virtual machine each `cpuid`
//! traps to the hypervisor (6 µs each on the project's machine). GCC ships the same
//! unwinder as a static archive, `libgcc_eh.a`, without that constructor. A directory
//! of our own, searched before the system's, holds it under the name `-lgcc_s` finds
//! first (the linker takes the first directory with `libgcc_s.so` or `libgcc_s.a`), so
//! the binary carries the unwinder and never loads `libgcc_s` (`rsandbox --version`,
//! `perf stat -r 400`: 1.22-1.25 ms -> 1.10-1.17 ms). Panics unwind and backtraces
//! print as before. Where the C compiler has no `libgcc_eh.a`, the build says so and
//! links the shared library as before: this is start-up time, not a security layer.
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=CC");
    let cc = std::env::var("CC").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "cc".to_string());
    match static_unwinder(&cc) {
        Some(archive) => {
            let dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("static-unwinder");
            std::fs::create_dir_all(&dir).expect("create OUT_DIR/static-unwinder");
            std::fs::copy(&archive, dir.join("libgcc_s.a")).expect("copy libgcc_eh.a into OUT_DIR");
            println!("cargo:rerun-if-changed={}", archive.display());
            println!("cargo:rustc-link-search=native={}", dir.display());
        }
        None => println!(
            "cargo:warning=no libgcc_eh.a from `{cc} -print-file-name=libgcc_eh.a`: rsandbox loads libgcc_s.so.1 (about 0.1 ms more per command)"
        ),
    }
}

/// The C compiler's static unwinder, if it has one (`-print-file-name` echoes the bare
/// name when it does not).
fn static_unwinder(cc: &str) -> Option<PathBuf> {
    let out = Command::new(cc).arg("-print-file-name=libgcc_eh.a").output().ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (out.status.success() && path.is_absolute() && path.is_file()).then_some(path)
}
