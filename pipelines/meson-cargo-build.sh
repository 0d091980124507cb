#!/usr/bin/env bash
# meson helper: builds the plugin with cargo and copies its shared library to OUTDIR.
set -euo pipefail
cargo=$1 source=$2 target_dir=$3 profile=$4 outdir=$5
"$cargo" build --locked --manifest-path "$source/Cargo.toml" --target-dir "$target_dir" \
    --profile "$profile" -p gst-plugin-moqt
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
cp "$target_dir/$dir/libgstmoqt.so" "$outdir/"
