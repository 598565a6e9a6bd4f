//! `rsandbox`: the command line (see the library's documentation for the commands and
//! which of them `rsandbox-server` runs).

/// Built against musl (the release command), the allocator is dlmalloc's, not musl's:
/// musl's returns each freed group of small blocks to the kernel at once, so one
/// `rsandbox exec -- /bin/true` made ~25 `mmap`/`munmap` pairs, 22% of its CPU on a
/// 2-core VM where each new page is costly; dlmalloc keeps freed memory for the next
/// allocation (exec took 0.88 of the time, `--version` 0.87). It replaces Rust's
/// allocations only (musl's own calls still use musl's allocator). Its lock is a pthread
/// mutex without fork handlers: the command forks only while single-threaded
/// (`RootTemplate::build`, the namespace-pinning helper, the probes of `check`), so
/// the lock is free at each fork; the `CLONE_VM` child of `lockdown::command::spawn`
/// allocates only while the parent waits, as with any allocator.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

fn main() -> std::process::ExitCode {
    rsandbox_cli::rsandbox_main()
}
