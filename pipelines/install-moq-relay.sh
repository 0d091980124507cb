#!/usr/bin/env bash
# Installs moq-relay (the MoQ relay the interop tests run against) into a cache directory,
# once. Prints the binary's path.
set -euo pipefail
version=0.17.10
root="${MOQ_TOOLS_DIR:-$HOME/.cache/moqsink-tools}"
bin="$root/bin/moq-relay"
if [ ! -x "$bin" ] || ! "$bin" --version 2>/dev/null | grep -q "$version"; then
    echo "== installing moq-relay $version into $root (several minutes, once)" >&2
    cargo install moq-relay --version "$version" --root "$root" >&2
fi
echo "$bin"
