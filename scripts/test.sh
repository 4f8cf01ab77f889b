#!/usr/bin/env bash
# The test suite: system packages, a virtual display for windowed tests, then every crate's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
# A wgpu app we did not write (wgpu-native ships in the wheel): tests/tests/capture_wgpu.rs.
python3 -c 'import wgpu' 2>/dev/null ||
  python3 -m pip install -q --disable-pip-version-check wgpu==0.32.0 ||
  echo "pip could not install wgpu: tests/tests/capture_wgpu.rs will skip" >&2
# Vulkan compute frameworks from PyPI (wheels for Python 3.11, Vulkan built in) for the real-programs
# tier, tests/tests/real_programs_python.rs: taichi (probes with an instance of its own first; its
# kernel profiler reads timestamps) and ncnn.
for pkg in taichi==1.7.4 ncnn==1.0.20261020; do
  python3 -c "import ${pkg%%==*}" 2>/dev/null ||
    python3 -m pip install -q --disable-pip-version-check "$pkg" ||
    echo "pip could not install $pkg: its tests in tests/tests/real_programs_python.rs will skip" >&2
done
if [ -z "${DISPLAY:-}" ]; then
  # A free display number, and wait until the server accepts connections: under load Xvfb can take
  # seconds to start, and a test that opens the display first would fail.
  n=99
  while [ -e "/tmp/.X$n-lock" ] || [ -e "/tmp/.X11-unix/X$n" ]; do n=$((n + 1)); done
  Xvfb ":$n" -screen 0 1280x1024x24 >/dev/null 2>&1 &
  xvfb_pid=$!
  trap 'kill $xvfb_pid 2>/dev/null || true' EXIT
  export DISPLAY=":$n"
  for _ in $(seq 100); do
    [ -e "/tmp/.X11-unix/X$n" ] && break
    kill -0 "$xvfb_pid" 2>/dev/null || { echo "Xvfb :$n failed to start" >&2; exit 1; }
    sleep 0.1
  done
  [ -e "/tmp/.X11-unix/X$n" ] || { echo "Xvfb :$n did not come up in 10 s" >&2; exit 1; }
fi
# Every binary and library: the end-to-end tests (quarry-tests) run target/<profile>/quarry and
# quarry-demo, and `quarry capture` loads the layer libraries from next to itself.
cargo build --workspace
cargo test --workspace --no-fail-fast "$@"
# Structure-aware fuzzing of `quarry replay` on lavapipe (issue 22): a bounded run over the checked-in
# corpus (tests/fixtures/corpus), a fixed count of execs from a fixed seed, so every machine replays the
# same mutated traces (a time limit would make what CI tests depend on its speed); crashers are saved
# under target/fuzz-crashers, and a crash or hang fails the run (BENCHMARKS.md, "Fuzzing `quarry
# replay`", has the long runs and the one rare open class). QUARRY_FUZZ_EXECS=0 leaves it out.
if [ "${QUARRY_FUZZ_EXECS:-600}" != 0 ]; then
  cargo run -p quarry-tests --bin fuzz_replay -- --jobs 2 --execs "${QUARRY_FUZZ_EXECS:-600}" --seconds 900
fi
