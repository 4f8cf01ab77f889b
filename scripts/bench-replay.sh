#!/usr/bin/env bash
# Replay time per frame against the application's own time per frame, quarry and GFXReconstruct
# side by side, on vkcube (and quarry-demo for quarry): one run, ratios printed at the end.
#
#   scripts/bench-replay.sh [FRAMES]          (default 2000; FRAMES=... or RUNS=... in the environment)
#
# Steps: build quarry's replayer and capture layer (release); start Xvfb when there is no display;
# run vkcube --c FRAMES alone (RUNS times, best kept), under quarry's capture layer, and under
# GFXReconstruct's capture layer (VK_LAYER_LUNARG_gfxreconstruct); replay the quarry trace
# (offscreen, headless: quarry's default) and the GFXR capture (gfxrecon-replay, which presents to
# a window: lavapipe here has no VK_EXT_headless_surface, so it runs on the X display).
#
# Figures per frame are steady-state: whole-run wall time minus a 1-frame run of the same program
# (instance/device creation, pipeline compilation), divided by FRAMES-1. The tools' own figures
# (quarry's per-loop time, gfxrecon-replay's "Replay FPS") are printed too.
set -euo pipefail
cd "$(dirname "$0")/.."
FRAMES=${1:-${FRAMES:-2000}}
RUNS=${RUNS:-3}
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
OUT=${OUT:-$(mktemp -d /tmp/bench-replay.XXXXXX)}
mkdir -p "$OUT"

need() { command -v "$1" >/dev/null || { echo "bench-replay: $1 not found (apt-get install -y $2)" >&2; exit 2; }; }
need vkcube vulkan-tools
need gfxrecon-replay gfxreconstruct
need Xvfb xvfb

if [ -z "${DISPLAY:-}" ]; then
  n=99
  while [ -e "/tmp/.X$n-lock" ] || [ -e "/tmp/.X11-unix/X$n" ]; do n=$((n + 1)); done
  Xvfb ":$n" -screen 0 1280x1024x24 >/dev/null 2>&1 &
  xvfb_pid=$!
  trap 'kill $xvfb_pid 2>/dev/null || true' EXIT
  export DISPLAY=":$n"
  for _ in $(seq 100); do
    [ -e "/tmp/.X11-unix/X$n" ] && break
    sleep 0.1
  done
fi

echo "== building (release)" >&2
cargo build -q --release -p replayer --example replay
cargo build -q --release -p capture_layer
cargo build -q --release -p demo
BIN=$CARGO_TARGET_DIR/release
LAYER=$OUT/layer
mkdir -p "$LAYER"
cp "$BIN/libVkLayer_quarry_capture.so" capture_layer/VkLayer_quarry_capture.json "$LAYER/"

# Wall seconds of a command (its output to $OUT/log.<tag>).
wall() {
  local tag=$1
  shift
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >"$OUT/log.$tag" 2>&1
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
# Best (least) wall seconds of RUNS runs.
best() {
  local tag=$1 b=""
  shift
  for _ in $(seq "$RUNS"); do
    local t
    t=$(wall "$tag" "$@")
    if [ -z "$b" ] || [ "$(echo "$t < $b" | bc -l)" = 1 ]; then b=$t; fi
  done
  echo "$b"
}
# ms per frame, steady state: (T(N) - T(1)) / (N - 1).
per_frame() { echo "($1 - $2) * 1000 / ($FRAMES - 1)" | bc -l; }

quarry_capture() { # FRAMES OUTPUT PROGRAM...
  local out=$1
  shift
  rm -f "$out"
  VK_ADD_LAYER_PATH=$LAYER VK_LOADER_LAYERS_ENABLE=VK_LAYER_QUARRY_capture QUARRY_CAPTURE_FILE=$out "$@"
}
gfxr_capture() { # OUTPUT PROGRAM...
  local out=$1
  shift
  rm -f "$out"
  VK_INSTANCE_LAYERS=VK_LAYER_LUNARG_gfxreconstruct GFXRECON_CAPTURE_FILE=$out \
    GFXRECON_CAPTURE_FILE_TIMESTAMP=false "$@"
}

echo "== vkcube --c $FRAMES: app alone, under each capture layer" >&2
app_n=$(best app.n vkcube --c "$FRAMES")
app_1=$(best app.1 vkcube --c 1)
qcap_n=$(wall qcap.n quarry_capture "$OUT/vkcube.qtrace" vkcube --c "$FRAMES")
wall qcap.1 quarry_capture "$OUT/vkcube1.qtrace" vkcube --c 1 >/dev/null
gcap_n=$(wall gcap.n gfxr_capture "$OUT/vkcube.gfxr" vkcube --c "$FRAMES")
wall gcap.1 gfxr_capture "$OUT/vkcube1.gfxr" vkcube --c 1 >/dev/null

echo "== replays" >&2
q_n=$(best q.n "$BIN/examples/replay" "$OUT/vkcube.qtrace")
q_1=$(best q.1 "$BIN/examples/replay" "$OUT/vkcube1.qtrace")
g_n=$(best g.n gfxrecon-replay "$OUT/vkcube.gfxr")
g_1=$(best g.1 gfxrecon-replay "$OUT/vkcube1.gfxr")
wall q.loops "$BIN/examples/replay" "$OUT/vkcube.qtrace" --loop 3 >/dev/null

app=$(per_frame "$app_n" "$app_1")
q=$(per_frame "$q_n" "$q_1")
g=$(per_frame "$g_n" "$g_1")
# quarry's own per-loop figure: mean of loops 2..3 over the frames.
q_loop=$(grep -o 'loop [23]/3[^:]*: [0-9.]* ms' "$OUT/log.q.loops" | awk '{s += $(NF-1); n++} END {if (n) printf "%.4f", s / n / '"$FRAMES"'; else print "nan"}')
g_fps=$(grep -o 'Replay FPS: [0-9.]*' "$OUT/log.g.n" | awk '{print $3}' | head -1)
g_own=$(echo "1000 / ${g_fps:-0}" | bc -l 2>/dev/null || echo nan)

size() { stat -c %s "$1"; }
printf '\nvkcube --c %s on %s (best of %s runs; ms per frame, steady state)\n' "$FRAMES" \
  "$(grep -o 'replayed on GPU [^:]*: .*' "$OUT/log.q.n" | head -1 | sed 's/replayed on GPU [0-9]*: //')" "$RUNS"
printf '%-34s %10s %8s\n' "" "ms/frame" "ratio"
printf '%-34s %10.3f %8s\n' "app (vkcube, windowed)" "$app" "1.00"
printf '%-34s %10.3f %8.2f\n' "quarry replay (offscreen)" "$q" "$(echo "$q / $app" | bc -l)"
printf '%-34s %10.3f %8.2f\n' "  quarry's own loop time" "$q_loop" "$(echo "$q_loop / $app" | bc -l)"
printf '%-34s %10.3f %8.2f\n' "gfxrecon-replay (window, Xvfb)" "$g" "$(echo "$g / $app" | bc -l)"
printf '%-34s %10.3f %8.2f\n' "  gfxrecon-replay's Replay FPS" "$g_own" "$(echo "$g_own / $app" | bc -l)"
printf '%-34s %10.3f %8.2f\n' "capture, quarry layer (whole run)" "$(echo "$qcap_n * 1000 / $FRAMES" | bc -l)" \
  "$(echo "$qcap_n / $app_n" | bc -l)"
printf '%-34s %10.3f %8.2f\n' "capture, GFXR layer (whole run)" "$(echo "$gcap_n * 1000 / $FRAMES" | bc -l)" \
  "$(echo "$gcap_n / $app_n" | bc -l)"
printf 'trace size: quarry %s bytes (%s B/frame), GFXR %s bytes (%s B/frame)\n' \
  "$(size "$OUT/vkcube.qtrace")" "$(( $(size "$OUT/vkcube.qtrace") / FRAMES ))" \
  "$(size "$OUT/vkcube.gfxr")" "$(( $(size "$OUT/vkcube.gfxr") / FRAMES ))"

echo "== quarry-demo (3 frames, headless): capture and replay" >&2
DEMO=$BIN/quarry-demo
d_app=$(best demo.app "$DEMO" --headless --frames 3)
wall demo.cap quarry_capture "$OUT/demo.qtrace" "$DEMO" --headless --frames 3 >/dev/null
d_q=$(best demo.q "$BIN/examples/replay" "$OUT/demo.qtrace")
d_g="capture failed"
if gfxr_capture "$OUT/demo.gfxr" "$DEMO" --headless --frames 3 >"$OUT/log.demo.gcap" 2>&1 && [ -s "$OUT/demo.gfxr" ]; then
  t=$(best demo.g gfxrecon-replay "$OUT/demo.gfxr")
  if grep -qi 'error\|fatal' "$OUT/log.demo.g"; then
    d_g="failed: $(grep -m1 -i 'error\|fatal' "$OUT/log.demo.g" | cut -c1-100 || true)"
  else
    d_g=$(printf '%.3f (%.2fx)' "$t" "$(echo "$t / $d_app" | bc -l)")
  fi
  # The headless demo never presents, and GFXR counts frames at vkQueuePresentKHR.
  if grep -q 'did not contain any frames' "$OUT/log.demo.g"; then d_g="$d_g, GFXR saw no frames"; fi
fi
printf '\nquarry-demo --headless --frames 3, whole runs in s (best of %s): app %.3f, quarry replay %.3f (%.2fx), gfxrecon-replay %s\n' \
  "$RUNS" "$d_app" "$d_q" "$(echo "$d_q / $d_app" | bc -l)" "$d_g"
echo "logs and traces: $OUT" >&2
