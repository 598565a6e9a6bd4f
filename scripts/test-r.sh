#!/usr/bin/env bash
# The R package (r/rsandbox): build it and run `R CMD check`, which runs its testthat
# suite against this tree's rsandbox binary. Fails on any ERROR or WARNING (a NOTE for
# the optional ellmer package, which Debian does not ship, is expected).
# Needs `cargo build` first and the R packages scripts/install-deps.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$PWD/target/debug/rsandbox"
[ -x "$bin" ] || bin="$PWD/target/release/rsandbox"
[ -x "$bin" ] || { echo "test-r: build rsandbox first (cargo build)" >&2; exit 1; }
export RSANDBOX_BIN="$bin"
export RSANDBOX_CONFORMANCE="$PWD/tests/conformance/scenarios.json"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
R CMD build "$OLDPWD/r/rsandbox" >build.log 2>&1 || { cat build.log; exit 1; }
# The vignette is built into the tarball (inst/doc), so that an install has it in doc/.
# (The listing goes to a file: grep -q would close the pipe early, and pipefail.)
tar -tzf rsandbox_*.tar.gz >contents.txt
grep -qx 'rsandbox/inst/doc/coming-from-securer.html' contents.txt ||
  { echo "test-r: R CMD build did not build the vignette" >&2; cat build.log; exit 1; }
status=0
_R_CHECK_FORCE_SUGGESTS_=false R CMD check --no-manual rsandbox_*.tar.gz >check.log 2>&1 || status=$?
grep -E "^\* checking|^Status|ERROR|WARNING|NOTE" check.log | grep -vE " \.\.\. OK$" || true
if [ $status -ne 0 ] || ! grep -qE "^Status: (OK|[0-9]+ NOTEs?)$" check.log; then
  echo "test-r: R CMD check failed" >&2
  cat rsandbox.Rcheck/tests/testthat.Rout.fail 2>/dev/null || true
  # A failing example: the end of the examples' transcript (the check's own line says
  # only ERROR, and the directory goes with the trap).
  grep -q "checking examples ... ERROR" check.log && tail -40 rsandbox.Rcheck/rsandbox-Ex.Rout 2>/dev/null || true
  exit 1
fi
[ -f rsandbox.Rcheck/rsandbox/doc/coming-from-securer.html ] ||
  { echo "test-r: the installed package has no vignette in doc/" >&2; exit 1; }
echo "test-r: R CMD check passed"
