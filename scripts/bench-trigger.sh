#!/usr/bin/env bash
# Capture on demand: what the layer costs while it waits for a trigger, and how long a trigger takes to
# become the first captured frame.
#
# 1. Tracking-only overhead. quarry-demo --headless --timing (its own split: the frames' steady state,
#    set-up and teardown apart) and vkcube (Xvfb, whole run), each without any layer ("none"), with the
#    layer loaded but disabled ("idle") and in trigger mode with no trigger coming ("trigger": the state
#    tracker runs, the control thread waits, vkcube's hotkey is polled). REPS runs per configuration,
#    interleaved in rotating order; medians and ratios against "none" measured in the same run.
# 2. Trigger-to-first-captured-frame latency: vkcube under `quarry capture --trigger --trigger-after S`
#    (the launcher sends the trigger over its channel, as `quarry trigger` does over the socket), LAT_RUNS
#    times; the layer notes in each trace how long it took from the trigger to the first captured frame
#    (the wait for the next frame boundary, then the snapshot), read back with `quarry dump`.
#
#   scripts/bench-trigger.sh
#   REPS=15 DEMO_FRAMES=2000 VKCUBE_FRAMES=3000 LAT_RUNS=10 scripts/bench-trigger.sh
#
# Builds the release layer and demo (and a debug quarry for part 2, unless QUARRY_BIN is given) into
# $CARGO_TARGET_DIR (default target/) unless NO_BUILD=1. Vulkan runs on lavapipe.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-9}
DEMO_FRAMES=${DEMO_FRAMES:-1000}
VKCUBE_FRAMES=${VKCUBE_FRAMES:-2000}
LAT_RUNS=${LAT_RUNS:-5}
TARGET=${CARGO_TARGET_DIR:-target}
ICD=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}

die() { echo "bench-trigger: $*" >&2; exit 1; }
if [ "${NO_BUILD:-0}" != 1 ]; then
  CARGO_TARGET_DIR=$TARGET cargo build --release -q -p capture_layer -p demo
  [ -n "${QUARRY_BIN:-}" ] || CARGO_TARGET_DIR=$TARGET cargo build -q -p quarry -p capture_layer
fi
layer_so=$(realpath "$TARGET/release/libVkLayer_quarry_capture.so")
demo_bin=$(realpath "$TARGET/release/quarry-demo")
quarry_bin=${QUARRY_BIN:-$TARGET/debug/quarry}
[ -f "$layer_so" ] || die "no $layer_so"

work=$(mktemp -d /tmp/quarry-bench-trigger.XXXXXX)
xvfb_pid=
cleanup() { [ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/layer"
cat >"$work/layer/VkLayer_quarry_capture.json" <<EOF
{ "file_format_version": "1.2.0", "layer": { "name": "VK_LAYER_QUARRY_capture", "type": "GLOBAL",
  "library_path": "$layer_so", "api_version": "1.3.239", "implementation_version": "1",
  "description": "quarry capture (benchmark)" } }
EOF
if [ -z "${DISPLAY:-}" ]; then
  n=99
  while [ -e "/tmp/.X$n-lock" ] || [ -e "/tmp/.X11-unix/X$n" ]; do n=$((n + 1)); done
  Xvfb ":$n" -screen 0 1280x1024x24 -nolisten tcp >/dev/null 2>&1 &
  xvfb_pid=$!
  export DISPLAY=":$n"
  for _ in $(seq 100); do [ -e "/tmp/.X11-unix/X$n" ] && break; sleep 0.1; done
fi

# run CONFIG APP: one run; appends its time in ms (the demo: its frames only) to $work/CONFIG-APP.
run() {
  local config=$1 app=$2 cmd=()
  case $app in
    vkcube) cmd=(vkcube --c "$VKCUBE_FRAMES") ;;
    demo) cmd=("$demo_bin" --headless --no-video --no-accel --timing --frames "$DEMO_FRAMES") ;;
  esac
  local env=(-u VK_INSTANCE_LAYERS -u VK_LOADER_LAYERS_ENABLE -u VK_ADD_LAYER_PATH -u QUARRY_CAPTURE_FILE
             -u QUARRY_CAPTURE_DISABLE -u QUARRY_CAPTURE_FRAMES -u QUARRY_CAPTURE_TRIGGER
             VK_DRIVER_FILES="$ICD" VK_ICD_FILENAMES="$ICD")
  local layer=(VK_ADD_LAYER_PATH="$work/layer" VK_LOADER_LAYERS_ENABLE=VK_LAYER_QUARRY_capture
               QUARRY_CAPTURE_FILE="$work/t.qtrace")
  case $config in
    none) ;;
    idle) env+=("${layer[@]}" QUARRY_CAPTURE_DISABLE=1) ;;
    trigger) env+=("${layer[@]}" QUARRY_CAPTURE_TRIGGER=1) ;;
  esac
  rm -f "$work"/t*.qtrace
  local t0 t1
  t0=$(date +%s%N)
  env "${env[@]}" "${cmd[@]}" >"$work/out" 2>&1 || { tail -5 "$work/out" >&2; die "$app failed under $config"; }
  t1=$(date +%s%N)
  ls "$work"/t*.qtrace >/dev/null 2>&1 && die "$config wrote a trace without a trigger"
  if [ "$app" = demo ]; then
    sed -n 's/^quarry-demo timing: .*frames \([0-9.]*\) ms.*/\1/p' "$work/out" >>"$work/$config-$app"
  else
    echo "$(( (t1 - t0) / 1000000 ))" >>"$work/$config-$app"
  fi
}

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

configs=(none idle trigger)
echo "bench-trigger: $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), REPS=$REPS"
for app in demo vkcube; do
  run none "$app"; rm -f "$work/none-$app"   # warm-up
  for r in $(seq "$REPS"); do
    for i in "${!configs[@]}"; do run "${configs[$(( (i + r) % ${#configs[@]} ))]}" "$app"; done
  done
  case $app in
    demo) echo; echo "quarry-demo --headless --no-video --no-accel --frames $DEMO_FRAMES: its frames' time (steady state), ms" ;;
    vkcube) echo; echo "vkcube --c $VKCUBE_FRAMES (Xvfb): whole run, ms" ;;
  esac
  base=$(median <"$work/none-$app")
  for c in "${configs[@]}"; do
    m=$(median <"$work/$c-$app")
    awk -v c="$c" -v m="$m" -v b="$base" -v all="$(tr '\n' ' ' <"$work/$c-$app")" \
      'BEGIN { printf "  %-8s median %9.1f  ratio %6.3fx   runs: %s\n", c, m, m / b, all }'
  done
  if command -v python3 >/dev/null; then
    echo "  ratio of medians with 90 % bootstrap interval:"
    for c in "${configs[@]}"; do echo "$c: $(tr '\n' ' ' <"$work/$c-$app")"; done |
      python3 scripts/ratio-interval.py | sed 's/^/    /'
  fi
done

echo
echo "trigger to first captured frame (vkcube, quarry capture --trigger --trigger-after 1.5, $LAT_RUNS runs):"
for i in $(seq "$LAT_RUNS"); do
  out=$work/lat$i.qtrace
  QUARRY_CAPTURE_LAYER_LIBRARY=$layer_so VK_DRIVER_FILES="$ICD" VK_ICD_FILENAMES="$ICD" \
    timeout 60 "$quarry_bin" capture --trigger --trigger-after 1.5 --hotkey none -o "$out" -- vkcube --c 1000000 \
    >"$work/lat-out" 2>&1 &
  qpid=$!
  for _ in $(seq 300); do [ -e "$work/lat${i}_1.qtrace" ] && grep -q "trace complete\|^trace: " "$work/lat-out" && break; sleep 0.1; done
  kill -TERM "$qpid" 2>/dev/null || true
  wait "$qpid" 2>/dev/null || true
  "$quarry_bin" dump --json "$work/lat${i}_1.qtrace" 2>/dev/null | grep -o 'capture on demand: [0-9.]* ms from the trigger[^"]*' |
    sed 's/^capture on demand: /  /' || echo "  run $i: no trace"
done
