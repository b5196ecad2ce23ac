#!/bin/bash
# s25 call 3: the gated tests (planner's pick and the paired tile forced) with the part (b)
# checks of test_cuda_grouped_swiglu reworked; the swiglu benches with the planner's picks
# (dense: block, block_mn, row; grouped: contiguous and masked), for docs/perf.md; row with lag 1.
cd "$(dirname "$0")/.."
O=${OUT:-/tmp/out}; mkdir -p $O/t
S=$O/0-summary.txt
t0=$(date +%s)
run() { local n=$1 to=$2; shift 2
  timeout $to "$@" > $O/t/$n.log 2>&1; local rc=$?
  echo "$n rc=$rc at $(( $(date +%s) - t0 )) s: $(grep -E 'passed|failed|ERROR SUMMARY|RACECHECK SUMMARY' $O/t/$n.log | tail -2 | tr '\n' ' ')" >> $S
  grep -m6 -E 'FAIL|Illegal|hazard detected|Invalid|mismatch' $O/t/$n.log >> $S; }
B=devbin/s
export LD_LIBRARY_PATH=$PWD/$B
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $S
run gsw 240 $B/test_cuda_grouped_swiglu
run gsw128 240 $B/test_cuda_grouped_swiglu --tuning gemm_bm=128
run gsw-seed 240 $B/test_cuda_grouped_swiglu --seed 7
run race 240 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 20 $B/test_cuda_grouped_swiglu --small
run mem 240 compute-sanitizer --tool memcheck $B/test_cuda_grouped_swiglu --small --tuning gemm_bm=128
timeout 150 $B/bench_swiglu --reps 10 --json $O/swiglu.jsonl --commit $1 > $O/t/bench-d.log 2>&1
echo "bench dense rc=$?" >> $S; cat $O/t/bench-d.log >> $S
for L in contiguous masked; do
timeout 150 $B/bench_swiglu --grouped 32 --layout $L --reps 10 --modes block,block_mn --json $O/gswiglu-$L.jsonl --commit $1 > $O/t/bench-g$L.log 2>&1
echo "bench grouped $L rc=$?" >> $S; cat $O/t/bench-g$L.log >> $S
done
timeout 100 $B/bench_swiglu --reps 10 --modes row --tuning gemm_lag=1 --json $O/swiglu-row-lag1.jsonl --commit $1 > $O/t/bench-lag.log 2>&1
echo "bench row lag1 rc=$?" >> $S; cat $O/t/bench-lag.log >> $S
tar czf $O/logs.tgz -C $O t && rm -rf $O/t
echo total $(( $(date +%s) - t0 )) s >> $S
cat $S
