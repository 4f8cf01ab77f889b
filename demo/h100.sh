#!/bin/sh
# Run on the NVIDIA H100 machine (headless, no X server needed):
#   demo/h100.sh            # uses target/release/quarry-demo, building it if missing
# JSON results on stdout, the --check table on stderr; exit 1 on any mismatch.
set -eu
cd "$(dirname "$0")/.."
BIN=${QUARRY_DEMO:-target/release/quarry-demo}
if [ ! -x "$BIN" ]; then
    cargo build --release -p demo
fi
exec "$BIN" --headless --frames 3 --check --json "$@"
