#!/usr/bin/env bash
# Runs the whole test suite: unit tests of every crate and of report.py, and the pipeline tests in tests/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash pipelines/setup.sh
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
# The benchmark report's figures (seconds; its quick run cannot show several repetitions).
/usr/bin/python3 -m unittest discover -s tools/bench -p 'test_*.py'
# Files of one crate that use each other: none allowed.
/usr/bin/python3 tools/checks/import_circles.py \
    crates/moq-session/src crates/moq-media/src crates/moq-player/src crates/h264/src plugins/*/src
cargo build --workspace --all-targets --locked
# The relay interop tests run against a real moq-relay (and moq-cli for its tokens).
MOQ_RELAY="$(bash pipelines/install-moq-relay.sh)"
MOQ_CLI="$(dirname "$MOQ_RELAY")/moq"
# moq-dev's GStreamer plugin, for the interop tests in both directions (built once).
MOQ_GST_DIR="$(bash pipelines/install-moq-gst.sh)"
export MOQ_RELAY MOQ_CLI MOQ_GST_DIR
cargo test --workspace --locked -- --test-threads=2 --skip moq_gst --skip a_browser_plays
# moq-gst's player decodes in real time with no buffer of its own, and the web player in
# headless Chromium draws on the same two cores: give each the machine.
cargo test --locked --test relay -- --test-threads=1 moq_gst
# The relay suite above ran on the default draft (the newest); on each other draft, a smoke
# subset: publish and play, delivery modes, A/V, a late joiner, JWT, the end of a stream, an
# outage, moq-gst both ways. pipelines/interop.sh runs the whole suite on every draft.
for draft in 20 16 14; do
    MOQ_DRAFT=$draft cargo test --locked --test relay -- --test-threads=2 \
        the_draft_in_use every_delivery_mode audio_and_video_play \
        two_subscribers_and_a_late_joiner requires_a_jwt the_end_of_the_stream \
        survives_a_5_second
    MOQ_DRAFT=$draft cargo test --locked --test relay -- --test-threads=1 moq_gst
done
cargo test --locked --test browser -- --test-threads=1
# The embedding examples, briefly: Rust (plugins linked in) and Python (plugins loaded).
cargo run --locked --quiet --example embed -- 3 | tail -n 1
GST_PLUGIN_PATH="$PWD/target/debug" /usr/bin/python3 examples/embed.py 3 | tail -n 1
bash pipelines/fuzz.sh 20
