#!/usr/bin/env bash
# Builds moq-gst, moq-dev's GStreamer plugin (compared in the benchmark), from crates.io into
# a cache directory, once. Prints the directory that holds libgstmoq.so.
set -euo pipefail
version=0.4.20
root="${MOQ_TOOLS_DIR:-$HOME/.cache/moqsink-tools}"
dir="$root/moq-gst-$version"
if [ ! -f "$dir/libgstmoq.so" ]; then
    echo "== building moq-gst $version into $dir (about 10 minutes on 2 cores, once)" >&2
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    mkdir -p "$work/fetch/src"
    printf '[package]\nname = "fetch-moq-gst"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nmoq-gst = "=%s"\n' \
        "$version" > "$work/fetch/Cargo.toml"
    touch "$work/fetch/src/lib.rs"
    (cd "$work/fetch" && cargo fetch >&2)
    src="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"moq-gst-$version" | head -n 1)"
    cp -r "$src" "$work/moq-gst"
    # Resolve afresh: the published lock file can pin releases newer than a registry mirror holds.
    rm -f "$work/moq-gst/Cargo.lock"
    (cd "$work/moq-gst" && CARGO_TARGET_DIR="$root/moq-gst-target" cargo build --release --lib >&2)
    mkdir -p "$dir"
    cp "$root/moq-gst-target/release/libgstmoq.so" "$dir/"
fi
echo "$dir"
