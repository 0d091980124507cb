#!/usr/bin/env bash
# Runs every fuzz target in fuzz/ for a short while: pipelines/fuzz.sh [SECONDS_PER_TARGET]
#
# Builds all targets once (cargo-fuzz, nightly, AddressSanitizer), then runs each for
# SECONDS_PER_TARGET (default 20) on a scratch copy of its committed corpus, so runs never
# grow fuzz/corpus. Inputs under fuzz/regressions/<target>/ are replayed first. Prints the
# executions per target and exits non-zero if any target crashed; reproducers are left in
# fuzz/artifacts/<target>/. Without a nightly toolchain it says so and skips (exit 0).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

SECONDS_PER_TARGET="${1:-20}"
CARGO_FUZZ_VERSION=0.13.2
TARGETS=(control data_stream frame_header catalog h264 receive_path)

if ! nightly="$(cargo +nightly --version 2>&1)"; then
    echo "!!!!!! FUZZING SKIPPED: no nightly Rust toolchain ('cargo +nightly' failed: ${nightly##*$'\n'})."
    echo "!!!!!! Install one with 'rustup toolchain install nightly' to run the fuzz targets."
    exit 0
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz $CARGO_FUZZ_VERSION"
    cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

echo "== building fuzz targets ($nightly)"
build_start=$SECONDS
(cd fuzz && cargo +nightly fuzz build)
build_time=$((SECONDS - build_start))
host="$(rustc +nightly -vV | sed -n 's/^host: //p')"
bin_dir="fuzz/target/$host/release"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

run_start=$SECONDS
failed=()
rows=()
for target in "${TARGETS[@]}"; do
    corpus="$scratch/corpus/$target"
    mkdir -p "$corpus" "fuzz/artifacts/$target"
    cp -r "fuzz/corpus/$target/." "$corpus/"
    inputs=("$corpus")
    [ -d "fuzz/regressions/$target" ] && inputs+=("fuzz/regressions/$target")
    log="$scratch/$target.log"
    echo "== $target: ${SECONDS_PER_TARGET}s"
    status=0
    nice -n 19 "$bin_dir/$target" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
        -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$target/" "${inputs[@]}" \
        >"$log" 2>&1 || status=$?
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    speed="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)"
    final="$(grep -E '^#[0-9]+' "$log" | tail -n 1 | grep -oE 'cov: [0-9]+ ft: [0-9]+' || true)"
    if [ "$status" -eq 0 ]; then
        result=ok
    else
        result="CRASH (exit $status)"
        failed+=("$target")
        grep -E -A1 "panicked at|ERROR: (AddressSanitizer|libFuzzer)" "$log" | head -n 8 || true
        grep -m 3 -E "at .*/(crates|fuzz_targets)/" "$log" || true
        grep -E "Test unit written to" "$log" || true
    fi
    rows+=("$(printf '%-14s %12s %9s  %-22s %s' "$target" "${execs:-?}" "${speed:-?}" "${final:-?}" "$result")")
done
run_time=$((SECONDS - run_start))

echo
printf '%-14s %12s %9s  %-22s %s\n' target executions exec/s coverage result
printf '%s\n' "${rows[@]}"
echo "build ${build_time}s, runs ${run_time}s"
if ((${#failed[@]})); then
    echo "FUZZING FAILED: crashes in ${failed[*]} (reproducers in fuzz/artifacts/)"
    exit 1
fi
