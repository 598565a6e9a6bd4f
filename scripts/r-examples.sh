#!/usr/bin/env bash
# R's documentation examples (base, stats, utils, graphics, grDevices, methods, datasets,
# tools, grid, splines) in plain `Rscript --vanilla` and in the sandbox: fails on a
# difference that is neither a withheld program, the network, nor listed with its reason
# in tests/r-examples/known-differences.tsv, and on a listed one that no longer occurs.
#   scripts/r-examples.sh                 every package (needs the workspace built)
#   scripts/r-examples.sh grid splines    some packages
#   scripts/r-examples.sh --only 'base/(sys|Sys)' --verbose base
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 tests/r-examples/run.py --rsandbox target/debug/rsandbox --jobs "${RSANDBOX_EXAMPLE_JOBS:-2}" "$@"
