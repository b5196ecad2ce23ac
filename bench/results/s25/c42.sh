#!/bin/bash
# s25 call 6: the swiglu benches with the planner's picks after the epilogue's up-front column
# loads (dense: block, block_mn, row; grouped over 32 / 64 experts: contiguous and masked), for
# docs/perf.md.
cd "$(dirname "$0")/.."
O=${OUT:-/tmp/out}; mkdir -p $O/t
S=$O/0-summary.txt
B=devbin/s
export LD_LIBRARY_PATH=$PWD/$B
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $S
timeout 150 $B/bench_swiglu --reps 10 --json $O/swiglu.jsonl --commit $1 > $O/t/bench-d.log 2>&1
echo "bench dense rc=$?" >> $S; cat $O/t/bench-d.log >> $S
for L in contiguous masked; do
timeout 150 $B/bench_swiglu --grouped 32 --layout $L --reps 10 --modes block,block_mn,row --json $O/gswiglu-$L.jsonl --commit $1 > $O/t/bench-g$L.log 2>&1
echo "bench grouped $L rc=$?" >> $S; cat $O/t/bench-g$L.log >> $S
done
tar czf $O/logs.tgz -C $O t && rm -rf $O/t
cat $S
