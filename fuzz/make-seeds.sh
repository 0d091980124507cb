#!/usr/bin/env bash
# Regenerates the seed corpus in fuzz/corpus/ from a real stream.
#
# Records a short x264 clip twice through h264parse (byte-stream and avc), turns it into seeds
# for every target with `make-seeds` (harness/src/bin/make-seeds.rs), minimises each target's
# seeds with `cargo fuzz cmin` and gives the survivors back their descriptive names.
# Needs GStreamer (x264enc, h264parse) and a nightly toolchain with cargo-fuzz.
set -euo pipefail
cd "$(dirname "$0")"
TARGETS=(control data_stream frame_header catalog h264 receive_path)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
stream="$work/stream"
mkdir -p "$stream/annexb" "$stream/avc"

SOURCE="videotestsrc num-buffers=60 pattern=ball ! video/x-raw,format=I420,width=320,height=240,framerate=24/1 ! x264enc bframes=3 key-int-max=15 ! h264parse"

# Byte-stream access units, with each buffer's DTS / PTS / duration from identity's log.
gst-launch-1.0 -v $SOURCE ! video/x-h264,alignment=au,stream-format=byte-stream \
    ! identity silent=false ! multifilesink location="$stream/annexb/au-%05d.h264" \
    >"$work/annexb.log" 2>&1
sed -n 's/.*(identity0:sink).* dts: \([0-9:.]*\), pts: \([0-9:.]*\), duration: \([0-9:.]*\),.*/\1 \2 \3/p' \
    "$work/annexb.log" >"$stream/timings.txt"

# The same clip as avc, and the avcC from the caps' codec_data.
gst-launch-1.0 -v $SOURCE ! video/x-h264,alignment=au,stream-format=avc \
    ! multifilesink location="$stream/avc/au-%05d.h264" >"$work/avc.log" 2>&1
grep -o 'codec_data=(buffer)[0-9a-f]*' "$work/avc.log" | head -n 1 | cut -d')' -f2 \
    >"$stream/codec_data.hex"

cargo run --quiet --release -p moq-fuzz-harness --bin make-seeds -- "$stream" "$work/seeds"

cargo +nightly fuzz build
for target in "${TARGETS[@]}"; do
    seeds="$work/seeds/$target"
    # Remember each seed's name by content: cmin names what it keeps by SHA-1.
    (cd "$seeds" && sha1sum -- *) >"$work/$target.names"
    cargo +nightly fuzz cmin "$target" "$seeds" >"$work/$target.cmin.log" 2>&1 \
        || { cat "$work/$target.cmin.log"; exit 1; }
    rm -rf "corpus/$target"
    mkdir -p "corpus/$target"
    for kept in "$seeds"/*; do
        hash="$(basename "$kept")"
        name="$(awk -v h="$hash" '$1 == h { print $2; exit }' "$work/$target.names")"
        cp "$kept" "corpus/$target/${name:-$hash}"
    done
    echo "$target: kept $(ls "corpus/$target" | wc -l) of $(wc -l <"$work/$target.names") seeds"
done
du -sh corpus
