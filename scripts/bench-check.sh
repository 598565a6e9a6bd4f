#!/bin/sh
# The sandbox's cost against its peers, checked against the committed figures: a reduced
# run of the bench (P6: `rsandbox exec -- /bin/true` beside /bin/true, unshare and bwrap;
# S1: a fresh evaluation through `serve --stdio` beside Rscript; SAMPLES interleaved
# samples of each, medians) that fails when a cost ratio (rsandbox / peer: ratios, not
# times, because the machine is noisy) is more than 50% worse than in
# bench/results/latest.json. C1 (`rsandbox eval` through the daemon beside Rscript) is
# not in the default set: a chain of short waits (a process start, a socket round trip,
# a pre-forked child), its ratio doubled in two runs at a load of 15 on 2 cores, while
# this build and main's, interleaved at a load of 3, measured the same; add it with
# SCENARIOS=P6,S1,C1 on a quieter runner.
#
# Robust on 2 noisy cores: a run that finds a ratio worse is repeated once, and the
# check fails only when the repeat finds one worse too (a regression shows twice; a
# burst of noise seldom does). About 15 s on 2 busy cores, twice that on a failure.
#
# Needs the release build of the whole workspace (cargo build --workspace --release),
# root, R, bubblewrap and unshare, like the bench. Other scenarios or sample counts:
#   SCENARIOS=P6,S1,C1,P1 SAMPLES=20 scripts/bench-check.sh
# (the full bench takes 5-8 minutes on 2 cores: not for every CI run).
set -eu
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
check() {
    cargo run --quiet --release -p rsandbox-bench -- --only "${SCENARIOS:-P6,S1}" -n "${SAMPLES:-25}" \
        --out "$out" --compare bench/results/latest.json
}
if check; then
    exit 0
fi
echo "bench-check: a ratio was more than 50% worse; measuring once more to tell a regression from noise"
check
