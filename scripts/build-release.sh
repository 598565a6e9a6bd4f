#!/usr/bin/env bash
# The release build as users run it: the workspace (`cargo build --workspace --release`),
# then the `rsandbox` command once more against musl, put in target/release/rsandbox in
# place of the glibc one, beside the server and the zygote it starts.
#
# Why: every rsandbox command starts this binary (`exec` above all: bench P6), and glibc's
# start-up reads the CPU's cache sizes with some sixty `cpuid` instructions, each trapped
# by the hypervisor on an Intel virtual machine (7-9 µs): 55% of `rsandbox --version`'s
# time (`perf record`), ~0.5 ms of every command. musl's start-up reads none. The server,
# the daemon and the zygote stay glibc builds: they start once (and the zygote links
# libR.so); the command only talks to them, or runs the engine itself.
#
# Without the musl target (install-deps.sh could not add it), the command stays the glibc
# build, which works the same, and this says so. `--version` names the C library. A later
# `cargo build --workspace --release` puts cargo's glibc command back (it copies its own
# output again); run this script again instead.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --workspace --release --quiet
musl="$(uname -m)-unknown-linux-musl"
if rustup target list --installed 2>/dev/null | grep -qx "$musl"; then
    # Whole-program optimised (the workspace's `release-command` profile: Cargo.toml says why).
    cargo build --profile release-command --quiet --target "$musl" -p rsandbox-cli --bin rsandbox
    # A new file moved over the old: cargo's copy may be a hard link to its own output.
    cp "target/$musl/release-command/rsandbox" target/release/.rsandbox-musl
    mv -f target/release/.rsandbox-musl target/release/rsandbox
else
    echo "build-release: Rust has no $musl target here: target/release/rsandbox is the glibc build" >&2
fi
target/release/rsandbox --version
