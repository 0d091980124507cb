#!/usr/bin/env bash
# meson helper: builds both plugins with cargo and copies the shared libraries to OUTDIR.
set -euo pipefail
cargo=$1 source=$2 target_dir=$3 profile=$4 outdir=$5
"$cargo" build --locked --manifest-path "$source/Cargo.toml" --target-dir "$target_dir" \
    --profile "$profile" -p gst-plugin-moqsink -p gst-plugin-moqsrc
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
cp "$target_dir/$dir/libgstmoqsink.so" "$target_dir/$dir/libgstmoqsrc.so" "$outdir/"
