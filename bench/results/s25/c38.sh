#!/bin/bash
# s25 call 2: the paired gated tile (shape.cuh NS 3, 128 rows by 2 x 64 of D's columns):
# the gated tests with the planner's pick, forced 128 and forced 64; sanitizers on the paired
# tile; bench of both tile heights, dense and grouped, block scales.
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
run sw128 240 $B/test_cuda_gemm_swiglu --tuning gemm_bm=128
run gsw128 240 $B/test_cuda_grouped_swiglu --tuning gemm_bm=128
run race128 240 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 20 $B/test_cuda_grouped_swiglu --small --tuning gemm_bm=128
run mem128 240 compute-sanitizer --tool memcheck $B/test_cuda_gemm_swiglu --small --tuning gemm_bm=128
run sw 240 $B/test_cuda_gemm_swiglu
run gsw 240 $B/test_cuda_grouped_swiglu
for bm in 64 128; do
  timeout 100 $B/bench_swiglu --reps 5 --modes block,row --tuning gemm_bm=$bm --json $O/swiglu-bm$bm.jsonl --commit wip > $O/t/bench-d$bm.log 2>&1
  echo "bench dense bm $bm rc=$?" >> $S; cat $O/t/bench-d$bm.log >> $S
  timeout 100 $B/bench_swiglu --grouped 32 --reps 5 --modes block --tuning gemm_bm=$bm --json $O/gswiglu-bm$bm.jsonl --commit wip > $O/t/bench-g$bm.log 2>&1
  echo "bench grouped bm $bm rc=$?" >> $S; cat $O/t/bench-g$bm.log >> $S
done
tar czf $O/logs.tgz -C $O t && rm -rf $O/t
echo total $(( $(date +%s) - t0 )) s >> $S
cat $S
