#!/usr/bin/env bash
# Capture side by side with GFXReconstruct on real programs (issue #32): each app without a layer,
# under quarry capturing and under GFXReconstruct capturing (and, with BASE_LAYER_SO, another build
# of quarry: before/after). Runs interleaved in rotating order, medians; throughput (glmark2's score,
# else 1 / wall time) and trace bytes as ratios against GFXReconstruct of the same run. Not a test:
# minutes long, and its figures depend on the machine; keep it out of CI.
#
#   scripts/bench.sh                                   # all four apps, REPS=3
#   REPS=5 APPS="glmark2 vkcube" scripts/bench.sh
#   BASE_LAYER_SO=old.so CONFIGS="none base quarry gfxr" scripts/bench.sh
#
# Apps: vkcube (--c VKCUBE_FRAMES, Xvfb), demo (quarry-demo --headless, DEMO_FRAMES), glmark2
# (texture scene on Zink, GLMARK_SECONDS, 256x256 off-screen), ffmpeg (FFMPEG_FRAMES frames of
# hwupload,libplacebo=w=1280:h=720,hwdownload). Vulkan on lavapipe. Builds the release layer and demo
# unless NO_BUILD=1 (LAYER_SO, DEMO_BIN override). Writes the table to TABLE (default target/bench.md).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
VKCUBE_FRAMES=${VKCUBE_FRAMES:-2000}
DEMO_FRAMES=${DEMO_FRAMES:-300}
GLMARK_SECONDS=${GLMARK_SECONDS:-10}
FFMPEG_FRAMES=${FFMPEG_FRAMES:-150}
APPS=${APPS:-vkcube demo glmark2 ffmpeg}
TARGET=${CARGO_TARGET_DIR:-target}
TABLE=${TABLE:-$TARGET/bench.md}
ICD=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}

die() { echo "bench: $*" >&2; exit 1; }
if [ "${NO_BUILD:-0}" != 1 ]; then
  CARGO_TARGET_DIR=$TARGET cargo build --release -q -p capture_layer -p demo
fi
layer_so=$(realpath "${LAYER_SO:-$TARGET/release/libVkLayer_quarry_capture.so}")
demo_bin=$(realpath "${DEMO_BIN:-$TARGET/release/quarry-demo}")
[ -f "$layer_so" ] || die "no $layer_so"
[ -f /usr/share/vulkan/explicit_layer.d/VkLayer_gfxreconstruct.json ] ||
  die "GFXReconstruct not installed (apt-get install gfxreconstruct)"
gfxr_version=$(dpkg-query -W -f='${Version}' gfxreconstruct 2>/dev/null || echo unknown)

work=$(mktemp -d /tmp/quarry-bench.XXXXXX)
xvfb_pid=
cleanup() { [ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
manifest() {
  mkdir -p "$1"
  cat >"$1/VkLayer_quarry_capture.json" <<EOF
{ "file_format_version": "1.2.0", "layer": { "name": "VK_LAYER_QUARRY_capture", "type": "GLOBAL",
  "library_path": "$2", "api_version": "1.3.239", "implementation_version": "1",
  "description": "quarry capture (benchmark)" } }
EOF
}
manifest "$work/layer" "$layer_so"
[ -n "${BASE_LAYER_SO:-}" ] && manifest "$work/layer-base" "$(realpath "$BASE_LAYER_SO")"

if [ -z "${DISPLAY:-}" ]; then
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

# run CONFIG APP: one run; appends "wall_ms score bytes" to $work/CONFIG-APP (score: glmark2's, else 0).
run() {
  local config=$1 app=$2 cmd=()
  [ -e "$work/$config-$app.failed" ] && return 0
  local env=(-u VK_INSTANCE_LAYERS -u VK_LOADER_LAYERS_ENABLE -u VK_ADD_LAYER_PATH -u QUARRY_CAPTURE_FILE
             -u QUARRY_CAPTURE_DISABLE -u QUARRY_CAPTURE_FRAMES -u GFXRECON_CAPTURE_FILE
             VK_DRIVER_FILES="$ICD" VK_ICD_FILENAMES="$ICD")
  case $app in
    vkcube) cmd=(vkcube --c "$VKCUBE_FRAMES") ;;
    demo) cmd=("$demo_bin" --headless --no-video --no-accel --frames "$DEMO_FRAMES") ;;
    glmark2) env+=(LIBGL_ALWAYS_SOFTWARE=1 GALLIUM_DRIVER=zink)
             cmd=(glmark2 --off-screen -b "texture:duration=$GLMARK_SECONDS" -s 256x256) ;;
    ffmpeg) cmd=(ffmpeg -hide_banner -loglevel error -init_hw_device vulkan=vk:0 -filter_hw_device vk
                 -f lavfi -i testsrc2=size=640x360:rate=30
                 -vf "format=yuv420p,hwupload,libplacebo=w=1280:h=720:format=yuv420p,hwdownload,format=yuv420p"
                 -frames:v "$FFMPEG_FRAMES" -f null -) ;;
    *) die "unknown app $app" ;;
  esac
  local trace=
  case $config in
    none) ;;
    quarry|base) trace=$work/t.qtrace
                 local dir=$work/layer
                 [ "$config" = base ] && dir=$work/layer-base
                 env+=(VK_ADD_LAYER_PATH="$dir" VK_LOADER_LAYERS_ENABLE=VK_LAYER_QUARRY_capture
                       QUARRY_CAPTURE_FILE="$trace") ;;
    gfxr) trace=$work/t.gfxr
          env+=(VK_LOADER_LAYERS_ENABLE=VK_LAYER_LUNARG_gfxreconstruct GFXRECON_CAPTURE_FILE="$trace"
                GFXRECON_CAPTURE_FILE_TIMESTAMP=false GFXRECON_LOG_LEVEL=warning) ;;
  esac
  rm -f "$work"/t.*
  local t0 t1
  t0=$(date +%s%N)
  if ! env "${env[@]}" "${cmd[@]}" >"$work/out" 2>&1; then
    echo "bench: $app failed under $config:" >&2
    tail -5 "$work/out" >&2
    touch "$work/$config-$app.failed"
    return 0
  fi
  t1=$(date +%s%N)
  local bytes=0 score=0
  if [ -n "$trace" ]; then
    [ -s "$trace" ] || { echo "bench: $config wrote no trace for $app" >&2; touch "$work/$config-$app.failed"; return 0; }
    bytes=$(stat -c %s "$trace")
  fi
  [ "$app" = glmark2 ] && score=$(sed -n 's/.*FPS: \([0-9]*\).*/\1/p' "$work/out" | head -1)
  echo "$(( (t1 - t0) / 1000000 )) ${score:-0} $bytes" >>"$work/$config-$app"
}

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) exit; if (NR % 2) print a[(NR + 1) / 2]; else print int((a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
col() { cut -d' ' -f"$2" "$work/$1" 2>/dev/null | median || true; }

read -r -a configs <<< "${CONFIGS:-none quarry gfxr}"
header="bench: $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), REPS=$REPS, GFXReconstruct $gfxr_version"
echo "$header"
{
  echo "$header"
  echo
  echo "| program | configuration | throughput | vs none | vs GFXR | trace bytes | bytes vs GFXR |"
  echo "|---|---|---|---|---|---|---|"
} >"$work/table"
for app in $APPS; do
  run none "$app"  # warm-up (shader caches, page cache), not counted
  rm -f "$work/none-$app"
  for r in $(seq "$REPS"); do
    for i in "${!configs[@]}"; do
      run "${configs[$(( (i + r) % ${#configs[@]} ))]}" "$app"
    done
  done
  # Throughput: glmark2's score; else runs per minute from the median wall time.
  tput() {
    [ -s "$work/$1-$app" ] || { echo 0; return; }
    if [ "$app" = glmark2 ]; then col "$1-$app" 2; else awk -v w="$(col "$1-$app" 1)" 'BEGIN { printf "%.3f", 60000 / w }'; fi
  }
  t_none=$(tput none); t_gfxr=$(tput gfxr); b_gfxr=$(col "gfxr-$app" 3)
  for c in "${configs[@]}"; do
    if [ ! -s "$work/$c-$app" ]; then
      echo "| $app | $c | failed | | | | |" >>"$work/table"
      continue
    fi
    t=$(tput "$c"); b=$(col "$c-$app" 3)
    awk -v app="$app" -v c="$c" -v t="$t" -v tn="$t_none" -v tg="$t_gfxr" -v b="$b" -v bg="${b_gfxr:-0}" \
      -v unit="$([ "$app" = glmark2 ] && echo score || echo runs/min)" 'BEGIN {
        printf "| %s | %s | %s %s | %s | %s | %s | %s |\n", app, c, t, unit,
          (tn > 0 ? sprintf("%.3f", t / tn) : "-"), (tg > 0 ? sprintf("%.3f", t / tg) : "-"),
          (b > 0 ? b : "-"), (b > 0 && bg > 0 ? sprintf("%.3f", b / bg) : "-") }' >>"$work/table"
  done
  echo "  $app: wall ms per run:" >&2
  for c in "${configs[@]}"; do echo "    $c: $(cut -d' ' -f1 "$work/$c-$app" 2>/dev/null | tr '\n' ' ')" >&2; done
done
cat "$work/table"
mkdir -p "$(dirname "$TABLE")"
cp "$work/table" "$TABLE"
echo "bench: table written to $TABLE"
