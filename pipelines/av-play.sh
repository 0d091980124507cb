#!/usr/bin/env bash
# Plays the video and audio of a MoQ broadcast published by moqsink.
# Usage: pipelines/av-play.sh FINGERPRINT [URL]   (default moqt://127.0.0.1:4443/live)
# Without a display or sound card, set VIDEO_SINK / AUDIO_SINK (e.g. fakesink).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 FINGERPRINT [URL]" >&2; exit 2; }
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo build --release --locked -p gst-plugin-moqt
export GST_PLUGIN_PATH="$PWD/target/release${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"
exec gst-launch-1.0 \
    moqsrc name=s url="${2:-moqt://127.0.0.1:4443/live}" tls-fingerprint="$1" \
    s. ! h264parse ! avdec_h264 ! videoconvert ! "${VIDEO_SINK:-autovideosink}" \
    s. ! opusdec ! audioconvert ! "${AUDIO_SINK:-autoaudiosink}"
