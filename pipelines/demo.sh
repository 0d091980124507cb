#!/usr/bin/env bash
# The main job: a live test stream through moqsink (one gst-launch-1.0 process) to moqsrc
# (a second process), decoded, printing frames and latency every second.
# Usage: pipelines/demo.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
bash pipelines/setup.sh
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo build --release --locked -p gst-plugin-moqt -p moq-demo
export GST_PLUGIN_PATH="$PWD/target/release${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"
exec target/release/moq-demo --seconds "${1:-10}"
