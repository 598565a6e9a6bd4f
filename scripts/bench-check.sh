#!/bin/sh
# The sandbox's cost against its peers, checked against the committed figures: runs the
# bench's P6 scenario (`rsandbox exec -- /bin/true` beside /bin/true, unshare and bwrap;
# about 10 s) and fails when a cost ratio (rsandbox / peer: ratios, not times, because
# the machine is noisy) is more than 50% worse than in bench/results/latest.json.
# Needs the release build of the whole workspace (cargo build --workspace --release) and
# root, like the bench. Other scenarios: SCENARIOS=P6,S1 scripts/bench-check.sh (the full
# bench takes 4-7 minutes on 2 cores: not for every CI run).
set -eu
cd "$(dirname "$0")/.."
exec cargo run --quiet --release -p rsandbox-bench -- --only "${SCENARIOS:-P6}" \
    --compare bench/results/latest.json
