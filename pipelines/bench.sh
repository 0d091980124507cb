#!/usr/bin/env bash
# The full benchmark: every profile and system (moq-gst through moq-relay included when it
# builds here; webrtc-gcc's plugins are built by moq-bench itself through
# pipelines/install-webrtc.sh, or it says why not), then the loss x RTT grid. About 4 h
# per repetition on 2 cores.
# Usage: pipelines/bench.sh [OUT_DIR] [extra moq-bench flags, e.g. --reps 3]
set -euo pipefail
cd "$(dirname "$0")/.."
bash pipelines/setup.sh
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo build --release --locked -p gst-plugin-moqt -p moq-bench
out="${1:-bench-results}"
shift || true
mkdir -p "$out"
rm -f "$out/moq-gst-unavailable.txt"
export MOQ_RELAY="$(bash pipelines/install-moq-relay.sh)"
extra=()
if moq_gst="$(bash pipelines/install-moq-gst.sh 2> "$out/moq-gst-build.log")"; then
    extra=(--moq-gst "$moq_gst")
else
    # The report says why moq-gst is missing instead of dropping it silently.
    tail -n 20 "$out/moq-gst-build.log" > "$out/moq-gst-unavailable.txt"
    echo "moq-gst did not build; see $out/moq-gst-build.log" >&2
fi
# Do not rebuild target/release while this runs: the senders are started from its binary.
target/release/moq-bench --out "$out" "${extra[@]}" "$@"
echo "results in $out (summary.json, frames/, links/, plots/, BENCHMARKS.md)"
