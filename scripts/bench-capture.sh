#!/usr/bin/env bash
# Capture overhead, side by side in one run: each app without any layer, with VK_LAYER_QUARRY_capture
# loaded but not capturing (QUARRY_CAPTURE_DISABLE=1), capturing every frame, and with GFXReconstruct
# (VK_LAYER_LUNARG_gfxreconstruct, Debian package gfxreconstruct) capturing; also a trimmed capture whose
# first frame never comes ("tracking": the state tracker's cost before a trim point). Wall and CPU (user+sys) time
# per run, REPS repetitions with the configurations interleaved (so drift and other load hit all of
# them alike), medians, ratios against the no-layer median of the same run; trace bytes per app frame.
#
#   scripts/bench-capture.sh                      # vkcube --c 2000 (Xvfb) and quarry-demo --headless
#   REPS=9 DEMO_FRAMES=300 VKCUBE_FRAMES=2000 APPS="vkcube demo" scripts/bench-capture.sh
#   REPS=41 CONFIGS="idle quarry" APPS=demo scripts/bench-capture.sh   # two configurations, more runs
#   BASE_LAYER_SO=old.so CONFIGS="idle base quarry" APPS=demo scripts/bench-capture.sh   # two builds
#
# Builds the release layer and demo into $CARGO_TARGET_DIR (default target/) unless NO_BUILD=1; LAYER_SO and
# DEMO_BIN override the files used. Vulkan runs on lavapipe unless ICD=<icd json> or ICD=system is given.
# GFXR_LAYER_DIR: a directory holding a GFXReconstruct manifest (default: the system's explicit layers).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-7}
VKCUBE_FRAMES=${VKCUBE_FRAMES:-2000}
DEMO_FRAMES=${DEMO_FRAMES:-300}
APPS=${APPS:-vkcube demo}
TARGET=${CARGO_TARGET_DIR:-target}
ICD=${ICD:-/usr/share/vulkan/icd.d/lvp_icd.x86_64.json}
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}

die() { echo "bench-capture: $*" >&2; exit 1; }
if [ "${NO_BUILD:-0}" != 1 ]; then
  CARGO_TARGET_DIR=$TARGET cargo build --release -q -p capture_layer -p demo
fi
layer_so=$(realpath "${LAYER_SO:-$TARGET/release/libVkLayer_quarry_capture.so}")
demo_bin=$(realpath "${DEMO_BIN:-$TARGET/release/quarry-demo}")
[ -f "$layer_so" ] || die "no $layer_so"
gfxr_dir=${GFXR_LAYER_DIR:-/usr/share/vulkan/explicit_layer.d}
[ -f "$gfxr_dir/VkLayer_gfxreconstruct.json" ] || die "GFXReconstruct not installed (apt-get install gfxreconstruct)"
gfxr_version=$(dpkg-query -W -f='${Version}' gfxreconstruct 2>/dev/null || echo "from $gfxr_dir")

work=$(mktemp -d /tmp/quarry-bench-capture.XXXXXX)
xvfb_pid=
cleanup() { [ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/layer"
cat >"$work/layer/VkLayer_quarry_capture.json" <<EOF
{ "file_format_version": "1.2.0", "layer": { "name": "VK_LAYER_QUARRY_capture", "type": "GLOBAL",
  "library_path": "$layer_so", "api_version": "1.3.239", "implementation_version": "1",
  "description": "quarry capture (benchmark)" } }
EOF
if [ -n "${BASE_LAYER_SO:-}" ]; then
  # Configuration "base": another build of the layer capturing (an A/B of two builds in one run).
  mkdir -p "$work/layer-base"
  sed "s#$layer_so#$(realpath "$BASE_LAYER_SO")#" "$work/layer/VkLayer_quarry_capture.json" \
    >"$work/layer-base/VkLayer_quarry_capture.json"
fi

if [[ " $APPS " == *" vkcube "* ]] && [ -z "${DISPLAY:-}" ]; then
  n=99
  while [ -e "/tmp/.X$n-lock" ] || [ -e "/tmp/.X11-unix/X$n" ]; do n=$((n + 1)); done
  Xvfb ":$n" -screen 0 1280x1024x24 -nolisten tcp >/dev/null 2>&1 &
  xvfb_pid=$!
  export DISPLAY=":$n"
  for _ in $(seq 100); do
    [ -e "/tmp/.X11-unix/X$n" ] && break
    kill -0 "$xvfb_pid" 2>/dev/null || die "Xvfb :$n failed to start"
    sleep 0.1
  done
fi

# run CONFIG APP: one timed run; appends "wall cpu bytes frames" to $work/CONFIG-APP. A configuration that
# fails once is reported and not run again.
run() {
  local config=$1 app=$2 frames cmd=()
  [ -e "$work/$config-$app.failed" ] && return 0
  case $app in
    vkcube) frames=$VKCUBE_FRAMES; cmd=(vkcube --c "$VKCUBE_FRAMES") ;;
    demo) frames=$DEMO_FRAMES; cmd=("$demo_bin" --headless --no-video --no-accel --frames "$DEMO_FRAMES") ;;
  esac
  local env=(-u VK_INSTANCE_LAYERS -u VK_LOADER_LAYERS_ENABLE -u VK_ADD_LAYER_PATH -u QUARRY_CAPTURE_FILE
             -u QUARRY_CAPTURE_DISABLE -u QUARRY_CAPTURE_FRAMES -u GFXRECON_CAPTURE_FILE)
  [ "$ICD" != system ] && env+=(VK_DRIVER_FILES="$ICD" VK_ICD_FILENAMES="$ICD")
  local trace=
  case $config in
    none) ;;
    idle) env+=(VK_ADD_LAYER_PATH="$work/layer" VK_LOADER_LAYERS_ENABLE=VK_LAYER_QUARRY_capture
                QUARRY_CAPTURE_DISABLE=1) ;;
    quarry) trace=$work/t.qtrace
            env+=(VK_ADD_LAYER_PATH="$work/layer" VK_LOADER_LAYERS_ENABLE=VK_LAYER_QUARRY_capture
                  QUARRY_CAPTURE_FILE="$trace") ;;
    base) trace=$work/t.qtrace
          env+=(VK_ADD_LAYER_PATH="$work/layer-base" VK_LOADER_LAYERS_ENABLE=VK_LAYER_QUARRY_capture
                QUARRY_CAPTURE_FILE="$trace") ;;
    # Trimmed capture whose first frame never comes: the state tracker runs the whole time.
    tracking) env+=(VK_ADD_LAYER_PATH="$work/layer" VK_LOADER_LAYERS_ENABLE=VK_LAYER_QUARRY_capture
                    QUARRY_CAPTURE_FILE="$work/t.qtrace" QUARRY_CAPTURE_FRAMES=1000000000-) ;;
    gfxr) trace=$work/t.gfxr
          [ -n "${GFXR_LAYER_DIR:-}" ] && env+=(VK_ADD_LAYER_PATH="$GFXR_LAYER_DIR")
          env+=(VK_LOADER_LAYERS_ENABLE=VK_LAYER_LUNARG_gfxreconstruct GFXRECON_CAPTURE_FILE="$trace"
                GFXRECON_CAPTURE_FILE_TIMESTAMP=false GFXRECON_LOG_LEVEL=warning) ;;
  esac
  rm -f "$work"/t.*
  local t0 t1
  t0=$(date +%s%N)
  # The subshell's `times` (second line: its children's user and sys time) is the app's CPU time.
  if ! (env "${env[@]}" "${cmd[@]}" >"$work/out" 2>&1 && times >"$work/time"); then
    echo "bench-capture: $app failed under $config:" >&2
    tail -5 "$work/out" >&2
    [ "$config" = none ] && exit 1
    touch "$work/$config-$app.failed"
    return 0
  fi
  t1=$(date +%s%N)
  local bytes=0
  if [ -n "$trace" ]; then
    [ -s "$trace" ] || { echo "bench-capture: $config wrote no trace for $app" >&2; touch "$work/$config-$app.failed"; return 0; }
    bytes=$(stat -c %s "$trace")
  fi
  # "0m1.234s 0m0.056s" -> ms
  local cpu
  cpu=$(sed -n 2p "$work/time" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%d", t * 1000 }')
  echo "$(( (t1 - t0) / 1000000 )) $cpu $bytes $frames" >>"$work/$config-$app"
}

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) exit; if (NR % 2) print a[(NR + 1) / 2]; else print int((a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

# CONFIGS picks configurations (default: all five); fewer give more repetitions in the same time.
read -r -a configs <<< "${CONFIGS:-none idle tracking quarry gfxr}"
echo "bench-capture: $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), REPS=$REPS, GFXReconstruct $gfxr_version"
for app in $APPS; do
  run none "$app"  # warm-up (shader caches, page cache), not counted
  rm -f "$work/none-$app"
  for r in $(seq "$REPS"); do
    # Rotate the order every repetition.
    for i in "${!configs[@]}"; do
      run "${configs[$(( (i + r) % ${#configs[@]} ))]}" "$app"
    done
  done
  case $app in
    vkcube) label="vkcube --c $VKCUBE_FRAMES" ;;
    demo) label="quarry-demo --headless --no-video --no-accel --frames $DEMO_FRAMES" ;;
  esac
  echo
  echo "$label ($REPS runs each, medians)"
  # "vs idle": against the layer loaded but not capturing, which runs the same workload where the layer
  # hides extensions it cannot capture (on GPUs that have them, the app then skips that work).
  printf '%-34s %9s %7s %8s %9s %7s %8s %12s %10s\n' configuration "wall ms" ratio "vs idle" "cpu ms" ratio "vs idle" "trace bytes" "B/frame"
  base_wall=$(cut -d' ' -f1 "$work/none-$app" 2>/dev/null | median || true)
  base_cpu=$(cut -d' ' -f2 "$work/none-$app" 2>/dev/null | median || true)
  idle_wall=$(cut -d' ' -f1 "$work/idle-$app" 2>/dev/null | median || true)
  idle_cpu=$(cut -d' ' -f2 "$work/idle-$app" 2>/dev/null | median || true)
  [ -n "$idle_wall" ] || { idle_wall=$base_wall; idle_cpu=$base_cpu; }
  [ -n "$base_wall" ] || { base_wall=$idle_wall; base_cpu=$idle_cpu; }
  for c in "${configs[@]}"; do
    if [ ! -s "$work/$c-$app" ]; then
      printf '%-34s %9s\n' "$c" failed
      continue
    fi
    wall=$(cut -d' ' -f1 "$work/$c-$app" | median)
    cpu=$(cut -d' ' -f2 "$work/$c-$app" | median)
    bytes=$(cut -d' ' -f3 "$work/$c-$app" | median)
    frames=$(head -1 "$work/$c-$app" | cut -d' ' -f4)
    case $c in
      none) name="no layer" ;;
      idle) name="quarry loaded, not capturing" ;;
      tracking) name="quarry tracking (trim, not yet)" ;;
      quarry) name="quarry capturing" ;;
      base) name="quarry capturing (BASE_LAYER_SO)" ;;
      gfxr) name="GFXReconstruct capturing" ;;
    esac
    awk -v n="$name" -v w="$wall" -v bw="$base_wall" -v cpu="$cpu" -v bc="$base_cpu" -v b="$bytes" -v f="$frames" \
      -v iw="$idle_wall" -v ic="$idle_cpu" \
      'BEGIN { printf "%-34s %9d %6.3fx %7.3fx %9d %6.3fx %7.3fx %12s %10s\n", n, w, w / bw, w / iw, cpu, cpu / bc,
               cpu / ic, (b > 0 ? b : "-"), (b > 0 ? sprintf("%.0f", b / f) : "-") }'
  done
  echo "wall ms per run:"
  for c in "${configs[@]}"; do echo "  $c: $(cut -d' ' -f1 "$work/$c-$app" 2>/dev/null | tr '\n' ' ')"; done
  if command -v python3 >/dev/null; then
    echo "wall time, ratio of medians with 90 % bootstrap interval:"
    for c in "${configs[@]}"; do echo "$c: $(cut -d' ' -f1 "$work/$c-$app" 2>/dev/null | tr '\n' ' ')"; done |
      python3 scripts/ratio-interval.py | sed 's/^/  /'
  fi
done
