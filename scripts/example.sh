#!/usr/bin/env bash
# Set-up command 1: install what is missing, build, and run one example evaluation.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
scripts/build-release.sh
./target/release/rsandbox check
./target/release/rsandbox eval --json 'fit <- lm(mpg ~ wt, data = mtcars); round(coef(fit), 3)'
