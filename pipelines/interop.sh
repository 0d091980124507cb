#!/usr/bin/env bash
# The relay test suite (tests/relay/) once per MoQ Transport draft, against moq-relay
# 0.17.10: publish/play, delivery modes, A/V, renditions and ABR, JWT, cluster failover,
# outages, moq-gst both ways. pipelines/interop.sh [DRAFT...] (default: 14 16 20 22).
#
# Installs moq-relay, moq-cli and moq-gst once, as pipelines/test.sh does. Prints a table of
# tests passed and failed, and the time, per draft, then the failures; the whole log of each
# draft is kept in target/interop/draft-N.log. Exits non-zero if any test failed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash pipelines/setup.sh
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

drafts=("$@")
((${#drafts[@]})) || drafts=(14 16 20 22)

MOQ_RELAY="$(bash pipelines/install-moq-relay.sh)"
MOQ_CLI="$(dirname "$MOQ_RELAY")/moq"
MOQ_GST_DIR="$(bash pipelines/install-moq-gst.sh)"
export MOQ_RELAY MOQ_CLI MOQ_GST_DIR
cargo build --locked --test relay

logs=target/interop
mkdir -p "$logs"
rows=()
failures=()
for draft in "${drafts[@]}"; do
    log="$logs/draft-$draft.log"
    echo "== draft-$draft (log: $log)"
    start=$SECONDS
    status=0
    # moq-gst's player decodes in real time with no buffer of its own: its tests get the
    # machine to themselves, the others run two at a time.
    {
        MOQ_DRAFT="$draft" cargo test --locked --test relay -- --test-threads=2 --include-ignored --skip moq_gst \
            || status=$?
        MOQ_DRAFT="$draft" cargo test --locked --test relay -- --test-threads=1 moq_gst \
            || status=$?
    } >"$log" 2>&1
    passed="$(grep -cE '^test .* \.\.\. ok$' "$log" || true)"
    failed="$(grep -cE '^test .* \.\.\. FAILED$' "$log" || true)"
    rows+=("$(printf '%-9s %6s %6s %7ss' "draft-$draft" "$passed" "$failed" "$((SECONDS - start))")")
    if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ]; then
        failures+=("$(grep -E '^test .* \.\.\. FAILED$' "$log" | sed "s/^test /draft-$draft: /; s/ \.\.\. FAILED$//")")
        [ "$failed" -ne 0 ] || failures+=("draft-$draft: the suite did not run to the end (see $log)")
    fi
done

echo
printf '%-9s %6s %6s %8s\n' draft passed failed time
printf '%s\n' "${rows[@]}"
if ((${#failures[@]})); then
    echo
    echo "FAILED:"
    printf '%s\n' "${failures[@]}"
    exit 1
fi
