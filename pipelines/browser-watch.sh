#!/usr/bin/env bash
# moqsink's broadcast in moq-dev's web player (@moq/watch): publishes a live test stream (H.264
# and Opus, format=hang) through a local moq-relay and serves the page of tools/browser on
# loopback. Prints the page's address to open in a browser on this machine and runs until
# Ctrl-C; with --screenshot FILE it opens the page in headless Chromium instead, lets it play
# for a few seconds and saves what it shows.
# Usage: pipelines/browser-watch.sh [--screenshot FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
screenshot=""
if [ "${1:-}" = "--screenshot" ]; then
    screenshot="$(realpath -m "${2:?--screenshot needs a file name}")"
fi
bash pipelines/setup.sh
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
relay_bin="${MOQ_RELAY:-$(bash pipelines/install-moq-relay.sh)}"
cargo build --locked -p gst-plugin-moqt
(cd tools/browser && npm ci --no-audit --no-fund >/dev/null)

# One port number for the relay's QUIC (UDP) and HTTP (TCP) sides: the page fetches the
# certificate's hash over HTTP from the address it then opens a WebTransport session to.
port="$(python3 -c '
import socket
for _ in range(50):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0)); p = u.getsockname()[1]
    t = socket.socket()
    try:
        t.bind(("127.0.0.1", p)); print(p); break
    except OSError:
        pass
    finally:
        t.close(); u.close()
')"

pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
"$relay_bin" --listen "127.0.0.1:$port" --web-http-listen "127.0.0.1:$port" \
    --listen-tls-generate localhost,127.0.0.1 --auth-public 'anon/**' --iroh-enabled=false \
    --log-level warn &
pids+=($!)
fingerprint=""
for _ in $(seq 100); do
    fingerprint="$(python3 -c "
import urllib.request
print(urllib.request.urlopen('http://127.0.0.1:$port/certificate.sha256', timeout=1).read().decode().strip())
" 2>/dev/null)" && break
    sleep 0.1
done
[ -n "$fingerprint" ] || { echo "moq-relay did not start" >&2; exit 1; }

GST_PLUGIN_PATH="$PWD/target/debug${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}" gst-launch-1.0 -q \
    videotestsrc is-live=true pattern=ball ! video/x-raw,format=I420,width=640,height=360,framerate=30/1 \
    ! timeoverlay ! x264enc tune=zerolatency bitrate=1000 key-int-max=30 speed-preset=veryfast ! h264parse ! m.video_0 \
    audiotestsrc is-live=true wave=ticks ! audio/x-raw,rate=48000,channels=2 ! opusenc ! m.audio_0 \
    moqsink name=m sync=false url="moqt://127.0.0.1:$port/anon" namespace=live format=hang \
    tls-fingerprint="$fingerprint" &
pids+=($!)

url="http://127.0.0.1:$port/anon"
if [ -n "$screenshot" ]; then
    node tools/browser/watch.mjs --url "$url" --name live --seconds 5 --screenshot "$screenshot" >/dev/null
    echo "screenshot of the page after 5 s of playback: $screenshot"
else
    node tools/browser/watch.mjs --url "$url" --name live --serve &
    pids+=($!)
    echo "moq-relay on 127.0.0.1:$port (QUIC and HTTP), broadcast 'live' under /anon; open the page above. Ctrl-C stops."
    wait
fi
