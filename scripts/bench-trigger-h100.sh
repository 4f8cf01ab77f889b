#!/usr/bin/env bash
# Run on the device machine (../shared/device/README.md: carry .gl, release binaries stripped into .gl/run).
# Tracking-only overhead on the H100: quarry-demo's steady-state frames ms without a layer ("none")
# and under `quarry capture --trigger` with no trigger coming ("trigger"), interleaved, REPS each.
source .gl/vk-env.sh
rm -f /tmp/res
R=.gl/run; REPS=${REPS:-15}; F=${F:-2000}
demo=(./$R/quarry-demo --headless --no-video --no-accel --timing --frames $F)
for i in $(seq $REPS); do
  for c in none trigger; do
    if [ $c = none ]; then "${demo[@]}" > /tmp/o 2>&1
    else $R/quarry capture --trigger --force -o /tmp/t.qtrace -- "${demo[@]}" > /tmp/o 2>&1; fi
    v=$(sed -n 's/^quarry-demo timing: .*frames \([0-9.]*\) ms.*/\1/p' /tmp/o)
    echo "$c $v" >> /tmp/res
  done
done
med() { sort -n | awk '{a[NR]=$1} END {print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
n=$(grep '^none' /tmp/res | awk '{print $2}' | med); t=$(grep '^trigger' /tmp/res | awk '{print $2}' | med)
echo "reps $REPS frames $F: none median $n ms, trigger (tracking only) median $t ms, ratio $(awk -v a=$t -v b=$n "BEGIN {printf \"%.4f\", a/b}")"
grep '^none' /tmp/res | awk '{print $2}' | tr '\n' ' '; echo; grep '^trigger' /tmp/res | awk '{print $2}' | tr '\n' ' '; echo
tail -2 /tmp/o
