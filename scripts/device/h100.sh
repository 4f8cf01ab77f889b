#!/usr/bin/env bash
# Device machine (../shared/device/README.md): unpack binaries, layers and traces (t/*.qtrace) into
# /tmp/r, then run this there; batch.sh replays each trace with a time limit and names a hang.
# One H100 batch: real-program traces captured on lavapipe, then the demo captured and replayed
# on the H100, then the trace that lost the device last time.
R=/tmp/r; o=/tmp/o; mkdir -p $o
health() { timeout -k 2 40 $R/quarry-demo --headless --frames 1 --check > $o/health-$1.log 2>&1; echo "health $1: rc=$? $(tail -1 $o/health-$1.log | cut -c1-100)"; }
health start
$R/batch.sh $o 60 $(cd $R/t && ls *.qtrace | sed 's/.qtrace$//' | grep -v coherency)
health after-batch
QUARRY_CAPTURE_PROFILE=1 timeout 120 $R/quarry capture --force -o /tmp/d.qtrace -- $R/quarry-demo --headless --frames 3 --check > $o/demo-cap.log 2>&1; echo "demo capture rc=$? $(grep -E 'check:|trace' $o/demo-cap.log | tail -2 | tr '\n' ' ' | cut -c1-200)"
timeout 120 $R/quarry replay /tmp/d.qtrace --compare --loop 2 > $o/demo-rep.log 2>&1; echo "demo replay --loop 2 rc=$? $(grep -E 'result:|quarry:' $o/demo-rep.log | tail -2 | tr '\n' ' ' | cut -c1-300)"
$R/quarry info /tmp/d.qtrace > $o/demo-info.log 2>&1; grep -iE "protect|host memory|scan" $o/demo-info.log | head -5
$R/quarry dump /tmp/d.qtrace 2>/dev/null | grep -E "^\[.*Note" | cut -c1-300 | head -8
health after-demo
# The trace that lost the device: replayed through frame K for growing K, to find the first
# window that loses it (a lost device wedges the GPU for every later run, so stop there).
for k in 10 20 30 40 50 60 70 80 89; do
  timeout -k 2 40 $R/quarry replay $R/t/arb_query_buffer_object-coherency.qtrace --frames 0-$k > $o/coh-$k.log 2>&1; rc=$?
  echo "coherency frames 0-$k: rc=$rc $(grep -E 'quarry:|result:' $o/coh-$k.log | tail -1 | cut -c1-200)"
  grep -qiE "lost|did not" $o/coh-$k.log && break
  [ $rc -ge 124 ] && break
done
health end
dmesg 2>/dev/null | grep -i xid | tail -3
tar czf $OUT/logs.tgz -C /tmp o
