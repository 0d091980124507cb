#!/usr/bin/env bash
# Publishes a live camera-like A/V test stream (H.264 + Opus) with moqsink, listening.
# Usage: pipelines/av-publish.sh [HOST:PORT]   (default 127.0.0.1:4443)
# The certificate's SHA-256 is in the moq-listening message printed at start; give it to
# pipelines/av-play.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo build --release --locked -p gst-plugin-moqt
export GST_PLUGIN_PATH="$PWD/target/release${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"
exec gst-launch-1.0 -e -m \
    videotestsrc is-live=true pattern=ball ! video/x-raw,format=I420,width=640,height=360,framerate=24/1 \
    ! x264enc tune=zerolatency key-int-max=48 bitrate=800 ! h264parse ! m.video_0 \
    audiotestsrc is-live=true wave=ticks ! audioconvert ! opusenc bitrate=64000 ! m.audio_0 \
    moqsink name=m listen="${1:-127.0.0.1:4443}"
