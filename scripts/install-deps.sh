#!/usr/bin/env bash
# Install what rsandbox, its tests and its benchmarks need on a fresh Debian/Ubuntu
# machine, from the distribution: R (libR.so and headers), the R packages the tests and
# the bench use, the peers the bench compares with, a C compiler, and Rust if cargo is
# missing. Each need is checked by the file it provides, so a second run is quick and
# calls no apt at all.
set -euo pipefail

need=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
# An R package from Debian (installed into R's site library).
have_rpkg() { [ -d "/usr/lib/R/site-library/$1" ] || [ -d "/usr/lib/R/library/$1" ]; }

have_cmd R || need+=(r-base-core r-base-dev)
[ -f "$(R RHOME 2>/dev/null)/lib/libR.so" ] 2>/dev/null || need+=(r-base-core r-base-dev)
have_cmd cc || need+=(gcc libc6-dev)
# The tests compare the seccomp program with libseccomp's (linked through pkg-config).
[ -f /usr/include/seccomp.h ] || need+=(libseccomp-dev)
have_cmd pkg-config || need+=(pkg-config)
have_cmd useradd || need+=(passwd)
have_cmd curl || need+=(curl ca-certificates)
have_cmd unshare || need+=(util-linux)
# The network allowlist's tests: a test host in a network namespace joined by a veth
# pair (ip, nsenter), serving a CRAN-like repository over HTTPS with a CA made per run.
have_cmd ip || need+=(iproute2)
have_cmd openssl || need+=(openssl)
have_cmd ps || need+=(procps)
# The bench's peers (bwrap rows) and the packages the attack corpus's calibration runs.
have_cmd bwrap || need+=(bubblewrap)
# Programs the attack corpus's calibration uses unsandboxed (download.file methods).
have_cmd wget || need+=(wget)
have_rpkg callr || need+=(r-cran-callr)
have_rpkg processx || need+=(r-cran-processx)
have_rpkg Matrix || need+=(r-cran-matrix)
have_rpkg data.table || need+=(r-cran-data.table)
# The R package (r/rsandbox) and its tests.
have_rpkg R6 || need+=(r-cran-r6)
have_rpkg jsonlite || need+=(r-cran-jsonlite)
have_rpkg rlang || need+=(r-cran-rlang)
have_rpkg cli || need+=(r-cran-cli)
have_rpkg testthat || need+=(r-cran-testthat)
# The MCP tests' client: Python's venv (the official MCP SDK goes into one, below).
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
# Its vignette.
have_rpkg knitr || need+=(r-cran-knitr)
have_rpkg rmarkdown || need+=(r-cran-rmarkdown)
have_cmd pandoc || need+=(pandoc)
# The deployment check (scripts/deploy-check.sh) runs HAProxy's own config check.
have_cmd haproxy || need+=(haproxy)
# The `rsandbox` command built against musl (scripts/build-release.sh): musl's C
# compiler for the C the command compiles in (the R grammar of `lint`).
have_cmd musl-gcc || need+=(musl-tools)

if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # Deduplicated; recommends off, so only what is named (and its dependencies) comes.
  mapfile -t unique < <(printf '%s\n' "${need[@]}" | sort -u)
  $SUDO apt-get install -y -qq --no-install-recommends "${unique[@]}" >/dev/null
fi

# The Python tools the tests run, each in a venv of the project's holding exactly the
# packages of its lock file (scripts/python-locks/, `pip freeze` of a venv that passed),
# dependencies included: a new release of an unpinned dependency once broke a test run
# (hypothesis under schemathesis). A venv whose lock file changed is made anew.
#   mcp-venv: the official MCP Python SDK (the MCP server's tests drive `rsandbox mcp`
#     with it; the HTTP load script uses its httpx).
#   http-venv: schemathesis (the HTTP API's test runs it against /openapi.json).
#   deploy-venv: kubernetes-validate (scripts/deploy-check.sh validates deploy/kubernetes
#     against the API schemas it ships).
python_locks="$(cd "$(dirname "$0")" && pwd)/python-locks"
locked_venv() {
  local venv="${XDG_CACHE_HOME:-$HOME/.cache}/rsandbox/$1" lock="$python_locks/$1.txt"
  if ! cmp -s "$lock" "$venv/rsandbox-lock.txt"; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$lock"
    cp "$lock" "$venv/rsandbox-lock.txt"
  fi
}
locked_venv mcp-venv
locked_venv http-venv
locked_venv deploy-venv

if ! have_cmd cargo; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    echo "cargo is in ~/.cargo/bin: add it to PATH" >&2
  else
    echo "installing Rust with rustup" >&2
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  fi
fi
# The tests check formatting and lints.
export PATH="$HOME/.cargo/bin:$PATH"
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  rustup component add rustfmt clippy
fi
# Rust's standard library for musl, for the `rsandbox` command (scripts/build-release.sh:
# glibc's start-up costs every command ~0.5 ms on an Intel virtual machine). Without
# rustup, or where its servers cannot be reached, the command is built against glibc, as
# the rest of the workspace: it works the same, only starts slower.
musl="$(uname -m)-unknown-linux-musl"
if have_cmd rustup && ! rustup target list --installed 2>/dev/null | grep -qx "$musl"; then
  rustup target add "$musl" >/dev/null 2>&1 ||
    echo "install-deps: rustup could not add $musl: rsandbox will be built against glibc" >&2
fi
