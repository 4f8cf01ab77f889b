#!/usr/bin/env bash
# Run on the device machine (../shared/device/README.md: carry .gl, release binaries stripped into .gl/run).
# Tracking-only overhead: quarry-demo's frames ms without a layer ("none", and "none2" again as an A/A
# noise floor) and under `quarry capture --trigger` with no trigger coming ("trigger"; "nolight" the
# same with QUARRY_CAPTURE_LIGHT=0, every command buffer tracked in full); "layer:NAME"
# runs the same with .gl/run/libVkLayer_quarry_capture_NAME.so (another build, same run). Configs are
# interleaved in an order that rotates from rep to rep; each rep's ratio is taken against that rep's
# "none" run (close in time, so slow drift of the VM cancels), and the median ratio is printed with a
# 90 % bootstrap interval.
source .gl/vk-env.sh
R=.gl/run; REPS=${REPS:-20}; F=${F:-300}; CONFIGS=${CONFIGS:-none none2 trigger}
demo=(./$R/quarry-demo --headless --no-video --no-accel --timing --frames $F)
rm -f /tmp/res
read -ra ALL <<< "$CONFIGS"
for i in $(seq $REPS); do
  # The order rotates from rep to rep: a config always run last would carry any drift within a rep.
  for k in $(seq 0 $((${#ALL[@]} - 1))); do
    c=${ALL[$(( (i + k) % ${#ALL[@]} ))]}
    case $c in
      none | none2) "${demo[@]}" > /tmp/o 2>&1 ;;
      trigger) $R/quarry capture --trigger --force -o /tmp/t.qtrace -- "${demo[@]}" > /tmp/o 2>&1 ;;
      nolight) QUARRY_CAPTURE_LIGHT=0 $R/quarry capture --trigger --force -o /tmp/t.qtrace -- "${demo[@]}" > /tmp/o 2>&1 ;;
      layer:*) QUARRY_CAPTURE_LAYER_LIBRARY=$PWD/$R/libVkLayer_quarry_capture_${c#layer:}.so \
        $R/quarry capture --trigger --force -o /tmp/t.qtrace -- "${demo[@]}" > /tmp/o 2>&1 ;;
      *) echo "unknown config $c" >&2; exit 2 ;;
    esac
    v=$(sed -n 's/^quarry-demo timing: .*frames \([0-9.]*\) ms.*cpu \([0-9.]*\) ms user \([0-9.]*\) ms sys.*/\1 \2 \3/p' /tmp/o)
    echo "$i $c $v" >> /tmp/res
  done
done
[ -n "${OUT:-}" ] && cp /tmp/res "$OUT/res.txt"
python3 - <<'PY'
import random, statistics as st
by = {}
for line in open('/tmp/res'):
    f = line.split()
    if len(f) == 5:
        by.setdefault(f[1], {})[int(f[0])] = (float(f[2]), float(f[3]), float(f[4]))
base = by['none']
random.seed(1)
for c, runs in by.items():
    if c == 'none':
        continue
    reps = [i for i in runs if i in base]
    r = [runs[i][0] / base[i][0] for i in reps]
    cpu = [runs[i][1] - base[i][1] for i in reps]
    boot = sorted(st.median(random.choices(r, k=len(r))) for _ in range(2000))
    print(f"{c}: frames ratio {st.median(r):.4f} (90 % {boot[100]:.4f}-{boot[1900]:.4f}), n={len(r)}, "
          f"main thread user cpu {st.median(cpu):+.1f} ms; frames median "
          f"{st.median(v[0] for v in runs.values()):.0f} ms, none {st.median(v[0] for v in base.values()):.0f} ms")
PY
