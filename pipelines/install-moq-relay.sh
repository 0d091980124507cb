#!/usr/bin/env bash
# Installs the moq-dev tools the interop tests run against into a cache directory, once:
# moq-relay (the relay) and moq-cli (`moq`, whose `moq auth` makes keys and tokens and
# answers a relay's auth requests). They share one build directory, so the second builds
# little. Prints moq-relay's path.
set -euo pipefail
relay_version=0.17.10
cli_version=0.14.10
root="${MOQ_TOOLS_DIR:-$HOME/.cache/moqsink-tools}"
export CARGO_TARGET_DIR="$root/target"
relay="$root/bin/moq-relay"
if [ ! -x "$relay" ] || ! "$relay" --version 2>/dev/null | grep -q "$relay_version"; then
    echo "== installing moq-relay $relay_version into $root (several minutes, once)" >&2
    cargo install moq-relay --version "$relay_version" --root "$root" >&2
fi
cli="$root/bin/moq"
if [ ! -x "$cli" ] || ! "$cli" --version 2>/dev/null | grep -q "$cli_version"; then
    echo "== installing moq-cli $cli_version into $root (a few minutes, once)" >&2
    cargo install moq-cli --version "$cli_version" --root "$root" >&2
fi
echo "$relay"
