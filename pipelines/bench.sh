#!/usr/bin/env bash
# The full benchmark: every profile and system, then the loss x RTT grid (about 1.5 h per
# repetition). Usage: pipelines/bench.sh [OUT_DIR] [extra moq-bench flags, e.g. --reps 3]
set -euo pipefail
cd "$(dirname "$0")/.."
bash pipelines/setup.sh
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo build --release --locked -p gst-plugin-moqsink -p gst-plugin-moqsrc -p moq-bench
out="${1:-bench-results}"
shift || true
target/release/moq-bench --out "$out" "$@"
echo "results in $out (summary.json, frames/, links/, plots/, BENCHMARKS.md)"
