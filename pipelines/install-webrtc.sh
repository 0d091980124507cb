#!/usr/bin/env bash
# Builds the WebRTC comparator of the benchmark (`webrtc-gcc`) from crates.io into a cache
# directory, once: gst-plugins-rs's webrtcsink/webrtcsrc (gst-plugin-webrtc), rtpgccbwe
# (gst-plugin-rtp, the Google congestion control webrtcsink drives its encoder with) and the
# signalling server they meet through (gst-plugin-webrtc-signalling). Installs the Debian
# packages they need (webrtcbin's ICE elements, the GstWebRTC development files).
# Prints the directory that holds the two plugin libraries and gst-webrtc-signalling-server.
#
# The three crates build as one workspace so their shared dependencies build once; the
# signalling library webrtcsink links is the one the server is built from. Default features
# are off: AWS, LiveKit, Janus, WHIP/WHEP and the web server are not needed here and bring
# large dependency trees. The TLS provider stays the signalling crate's default (aws-lc-rs):
# gst-plugin-webrtc asks for the signalling crate with its default features, and one
# provider for both avoids rustls finding two.
set -euo pipefail
version=0.15.4
root="${MOQ_TOOLS_DIR:-$HOME/.cache/moqsink-tools}"
dir="$root/webrtc-$version"

packages=(pkg-config build-essential libssl-dev gstreamer1.0-nice gstreamer1.0-plugins-bad
    libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libgstreamer-plugins-bad1.0-dev)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "== installing ${missing[*]}" >&2
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

libs=(libgstrswebrtc.so libgstrsrtp.so gst-webrtc-signalling-server)
built() {
    for f in "${libs[@]}"; do [ -f "$dir/$f" ] || return 1; done
}
if ! built; then
    echo "== building gst-plugin-webrtc, gst-plugin-rtp and the signalling server $version" \
        "into $dir (about 20 minutes on 2 cores, once)" >&2
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    mkdir -p "$work/fetch/src"
    cat > "$work/fetch/Cargo.toml" <<EOF
[package]
name = "fetch-webrtc"
version = "0.0.0"
edition = "2021"

[dependencies]
gst-plugin-webrtc = { version = "=$version", default-features = false }
gst-plugin-rtp = { version = "=$version", default-features = false }
gst-plugin-webrtc-signalling = { version = "=$version" }
EOF
    touch "$work/fetch/src/lib.rs"
    (cd "$work/fetch" && cargo fetch >&2)
    registry="${CARGO_HOME:-$HOME/.cargo}/registry/src"
    mkdir -p "$work/ws"
    for crate in gst-plugin-webrtc gst-plugin-rtp gst-plugin-webrtc-signalling; do
        src="$(ls -d "$registry"/*/"$crate-$version" | head -n 1)"
        cp -r "$src" "$work/ws/$crate"
        # Resolve afresh: a published lock file can pin releases newer than a mirror holds.
        rm -f "$work/ws/$crate/Cargo.lock"
    done
    # resolver 3 picks dependency releases that the crates' rust-version builds.
    cat > "$work/ws/Cargo.toml" <<EOF
[workspace]
resolver = "3"
members = ["gst-plugin-webrtc", "gst-plugin-rtp", "gst-plugin-webrtc-signalling"]

[patch.crates-io]
gst-plugin-webrtc-signalling = { path = "gst-plugin-webrtc-signalling" }
gst-plugin-rtp = { path = "gst-plugin-rtp" }
EOF
    (cd "$work/ws" && CARGO_TARGET_DIR="$root/webrtc-target" cargo build --release \
        -p gst-plugin-webrtc -p gst-plugin-rtp -p gst-plugin-webrtc-signalling \
        --lib --bin gst-webrtc-signalling-server \
        --no-default-features --features gst-plugin-webrtc-signalling/rustls-aws-lc-rs,gst-plugin-webrtc/rustls-aws-lc-rs >&2)
    mkdir -p "$dir"
    for f in "${libs[@]}"; do
        cp "$root/webrtc-target/release/$f" "$dir/"
    done
fi
echo "$dir"
