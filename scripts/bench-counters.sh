#!/usr/bin/env bash
# Multi-pass and counter-injection cost on this machine, in one run:
#   N-pass replay time against N x the one-pass replay time of the same trace (target <= 1.05),
#   and the replay time that --counters adds per measured command buffer.
# Usage: scripts/bench-counters.sh [TARGET_DIR]   (default target/release; build with
#   cargo build --release --workspace --bins first). Medians of REPS runs (default 5).
set -euo pipefail
dir=${1:-target/release}
reps=${REPS:-5}
q="$dir/quarry"
demo="$dir/quarry-demo"
for f in "$q" "$demo" "$dir/libVkLayer_quarry_counters.so"; do
  [ -e "$f" ] || { echo "missing $f (cargo build --release --workspace --bins)" >&2; exit 1; }
done
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
QUARRY_COUNTERS_PER_PASS=2 "$q" capture --emulate-counters -o "$work/perf.qtrace" -- \
  "$demo" --headless --frames 20 --gpu llvmpipe >/dev/null
"$q" capture -o "$work/plain.qtrace" -- "$demo" --headless --frames 20 --gpu llvmpipe >/dev/null

# Wall time of one replay in ms (the replayer's own "replay X ms per loop" figure).
replay_ms() {
  "$@" 2>/dev/null | sed -n 's/.*replay \([0-9.]*\) ms per loop.*/\1/p'
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
runs() { for _ in $(seq "$reps"); do replay_ms "$@"; done | median; }

one=$(QUARRY_COUNTERS_PER_PASS=10 runs "$q" replay "$work/perf.qtrace" --emulate-counters --gpu llvmpipe)
three=$(QUARRY_COUNTERS_PER_PASS=10 runs "$q" replay "$work/perf.qtrace" --emulate-counters --gpu llvmpipe --passes 3)
eight=$(QUARRY_COUNTERS_PER_PASS=10 runs "$q" replay "$work/perf.qtrace" --emulate-counters --gpu llvmpipe --passes 8)
echo "multi-pass replay (demo, 20 frames, 8 counters, median of $reps):"
awk -v a="$one" -v b="$three" -v c="$eight" 'BEGIN {
  printf "  1 pass %.1f ms; 3 passes %.1f ms = %.3f x (3 x 1 pass); 8 passes %.1f ms = %.3f x (8 x 1 pass)\n",
    a, b, b / (3 * a), c, c / (8 * a) }'

base=$(runs "$q" replay "$work/plain.qtrace" --emulate-counters --gpu llvmpipe)
cbs=$(QUARRY_COUNTERS_PER_PASS=10 "$q" replay "$work/plain.qtrace" --gpu llvmpipe --counters all 2>/dev/null |
  sed -n 's/counters measured around \([0-9]*\) .*/\1/p')
inj=$(QUARRY_COUNTERS_PER_PASS=10 runs "$q" replay "$work/plain.qtrace" --gpu llvmpipe --counters all)
echo "counter injection (all 10 counters in one pass, per command buffer):"
awk -v a="$base" -v b="$inj" -v n="$cbs" 'BEGIN {
  printf "  replay %.1f ms, with --counters all %.1f ms (%.2f x); %d command buffers: %.0f us each\n",
    a, b, b / a, n, (b - a) * 1000 / n }'
