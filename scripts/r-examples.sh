#!/usr/bin/env bash
# R's documentation examples (base, stats, utils, graphics, grDevices, methods, datasets,
# tools, grid, splines) in the sandbox, compared with plain `Rscript --vanilla`: fails on a
# difference that is neither a withheld program, the network, nor listed with its reason
# in tests/r-examples/known-differences.tsv, and on a listed one that no longer occurs.
# Plain R's outcomes come from tests/r-examples/plain-r-baseline.tsv where R's version and
# the page's code match it; other pages run in plain R too.
#   scripts/r-examples.sh                    every page (needs the workspace built)
#   scripts/r-examples.sh grid splines       some packages
#   scripts/r-examples.sh --only 'base/(sys|Sys)' --verbose base
#   scripts/r-examples.sh --update-baseline  rewrite the baseline (plain R only; commit it)
#   scripts/r-examples.sh --no-baseline      plain R for every page (the uncached check)
# RSANDBOX_EXAMPLE_JOBS: sandbox evaluations in flight (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 tests/r-examples/run.py --rsandbox target/debug/rsandbox --jobs "${RSANDBOX_EXAMPLE_JOBS:-2}" "$@"
