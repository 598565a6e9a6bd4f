#!/usr/bin/env bash
# Install what rsandbox needs on a fresh Debian/Ubuntu machine: R from the distribution
# (libR.so and headers), a C compiler, and the Rust toolchain if cargo is missing.
set -euo pipefail

need=()
command -v R >/dev/null 2>&1 || need+=(r-base-core r-base-dev)
[ -f "$(R RHOME 2>/dev/null)/lib/libR.so" ] 2>/dev/null || need+=(r-base-core r-base-dev)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v useradd >/dev/null 2>&1 || need+=(passwd)
command -v curl >/dev/null 2>&1 || need+=(curl ca-certificates)

if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    echo "cargo is in ~/.cargo/bin: add it to PATH" >&2
  else
    echo "installing Rust with rustup" >&2
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  fi
fi
