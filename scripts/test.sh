#!/usr/bin/env bash
# The test suite: system packages, a virtual display for windowed tests, then every crate's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
if [ -z "${DISPLAY:-}" ]; then
  Xvfb :99 -screen 0 1280x1024x24 >/dev/null 2>&1 &
  xvfb_pid=$!
  trap 'kill $xvfb_pid 2>/dev/null || true' EXIT
  export DISPLAY=:99
  sleep 1
fi
cargo build --workspace --bins
cargo test --workspace --no-fail-fast "$@"
