#!/usr/bin/env bash
# Replay time with `--memory rebind` against `--memory remap` on one trace, measured in the same run
# (replayer/examples/memory_modes.rs: the modes alternated run by run, the first loop of each replay
# left out, medians and the rebind/remap ratio printed).
#
#   scripts/bench-memory.sh [TRACE] [RUNS] [LOOPS] [GPU]
#
# Without TRACE, captures `quarry-demo --headless --frames 30` on lavapipe first (needs
# `cargo build --workspace --bins`, for quarry and the layer). RUNS defaults to 15, LOOPS to 5.
set -euo pipefail
cd "$(dirname "$0")/.."
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
TRACE=${1:-}
RUNS=${2:-15}
LOOPS=${3:-5}
GPU=${4:-}
if [ -z "$TRACE" ]; then
  TRACE=$(mktemp -d /tmp/bench-memory.XXXXXX)/demo.qtrace
  "$CARGO_TARGET_DIR/debug/quarry" capture -o "$TRACE" -- "$CARGO_TARGET_DIR/debug/quarry-demo" \
    --headless --frames 30 --gpu llvmpipe >/dev/null
  GPU=${GPU:-llvmpipe}
fi
cargo build -q --release -p replayer --example memory_modes
"$CARGO_TARGET_DIR/release/examples/memory_modes" "$TRACE" "$RUNS" "$LOOPS" ${GPU:+"$GPU"}
