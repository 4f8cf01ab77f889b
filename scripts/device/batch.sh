#!/usr/bin/env bash
# usage: batch.sh OUTDIR TIMEOUT trace... ; replays each, logs rc/time, dumps thread state on timeout
out=$1; to=$2; shift 2
R=$(dirname "$0")
for t in "$@"; do
  n=$(basename $t .qtrace)
  s=$(date +%s%N)
  $R/quarry replay $R/t/$t.qtrace --compare --results $out/$n.qres $EXTRA > $out/$n.log 2>&1 &
  pid=$!
  for i in $(seq $((to*10))); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  if kill -0 $pid 2>/dev/null; then
    echo "== HUNG after ${to}s: threads" >> $out/$n.log
    for th in /proc/$pid/task/*; do echo "$(cat $th/comm) $(cat $th/wchan) $(cat $th/stat | cut -d' ' -f3)" >> $out/$n.log; cat $th/stack >> $out/$n.log 2>/dev/null; done
    kill -9 $pid; wait $pid 2>/dev/null; rc=HUNG
  else wait $pid; rc=$?; fi
  e=$(date +%s%N)
  echo "$n rc=$rc $(( (e-s)/1000000 ))ms | $(grep -E 'result:|quarry:' $out/$n.log | tail -1 | cut -c1-220)"
done
