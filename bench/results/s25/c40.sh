#!/bin/bash
# s25 call 4: the gated epilogue's per-column inputs loaded up front (row scales of B, bias):
# the gated tests, then the swiglu bench (row and block, dense and grouped).
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
run sw 240 $B/test_cuda_gemm_swiglu
run sw128 240 $B/test_cuda_gemm_swiglu --tuning gemm_bm=128
run gsw 240 $B/test_cuda_grouped_swiglu
run gsw128 240 $B/test_cuda_grouped_swiglu --tuning gemm_bm=128
timeout 150 $B/bench_swiglu --reps 10 --modes row,block --json $O/swiglu.jsonl --commit $1 > $O/t/bench-d.log 2>&1
echo "bench dense rc=$?" >> $S; cat $O/t/bench-d.log >> $S
timeout 150 $B/bench_swiglu --grouped 32 --reps 10 --modes block,row --json $O/gswiglu.jsonl --commit $1 > $O/t/bench-g.log 2>&1
echo "bench grouped rc=$?" >> $S; cat $O/t/bench-g.log >> $S
tar czf $O/logs.tgz -C $O t && rm -rf $O/t
echo total $(( $(date +%s) - t0 )) s >> $S
cat $S
