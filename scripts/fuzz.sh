#!/usr/bin/env bash
# Fuzz every cargo-fuzz target for a bounded time (FUZZ_SECONDS each, 12 by default:
# about a minute in all) from the committed corpus in fuzz/corpus/; fails on any crash,
# whose input libFuzzer leaves in fuzz/artifacts/<target>/.
#
# Stable Rust: `--sanitizer none` (libFuzzer's coverage instrumentation, sancov, is a
# stable codegen option; only the sanitizers need nightly). What is fuzzed is safe Rust,
# where a panic (an overflow, an index, an unwrap, a failed assert) is the crash.
#
# New inputs go to a temporary corpus, never into the committed one; to grow the
# committed corpus (under 200 files each), fuzz longer into a directory of your own and
# add its best inputs with `python3 fuzz/minimize.py <target> <dir>`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
seconds="${FUZZ_SECONDS:-12}"
targets=(wire_frames outcome stdio_request profile_toml http_bodies)
if ! command -v cargo-fuzz >/dev/null; then
    cargo install --locked cargo-fuzz
fi
cd fuzz
cargo fuzz build --sanitizer none
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for target in "${targets[@]}"; do
    mkdir -p "$work/$target"
    echo "fuzz: $target for ${seconds}s"
    # -max_total_time bounds the run; -timeout makes a slow input a crash (a hang); the
    # last line of libFuzzer's output names a crash's input.
    if ! cargo fuzz run --sanitizer none "$target" "$work/$target" "corpus/$target" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=0 \
        >"$work/$target.log" 2>&1; then
        tail -n 40 "$work/$target.log"
        echo "fuzz: $target crashed (input in fuzz/artifacts/$target/)" >&2
        exit 1
    fi
    grep -E '^Done [0-9]+ runs' "$work/$target.log" | sed "s/^/fuzz: $target: /"
done
echo "fuzz: ${#targets[@]} passed, 0 failed"
