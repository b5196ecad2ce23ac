#!/bin/bash
# s25 call 1: the grouped gated kernel (sm90_glu_grouped) and grouped output quantization:
# the new test, sanitizers on it, regressions of the dense gated / grouped / dense GEMM tests,
# then a first grouped swiglu bench.
cd "$(dirname "$0")/.."
O=${OUT:-/tmp/out}; mkdir -p $O/t
S=$O/0-summary.txt
t0=$(date +%s)
run() { local n=$1 to=$2; shift 2
  timeout $to "$@" > $O/t/$n.log 2>&1; local rc=$?
  echo "$n rc=$rc at $(( $(date +%s) - t0 )) s: $(grep -E 'passed|failed|ERROR SUMMARY|RACECHECK SUMMARY' $O/t/$n.log | tail -2 | tr '\n' ' ')" >> $S
  grep -m8 -E 'FAIL|Illegal|hazard detected|Invalid|mismatch' $O/t/$n.log >> $S; }
B=devbin/s
export LD_LIBRARY_PATH=$PWD/$B
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >> $S
run gsw-small 120 $B/test_cuda_grouped_swiglu --small
run gsw 300 $B/test_cuda_grouped_swiglu
run race 240 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 20 $B/test_cuda_grouped_swiglu --small
run mem 240 compute-sanitizer --tool memcheck $B/test_cuda_grouped_swiglu --small
run swiglu 240 $B/test_cuda_gemm_swiglu
run grouped 240 $B/test_cuda_grouped
run gstaged 240 $B/test_cuda_grouped_staged
run gemm 300 $B/test_cuda_gemm
timeout 150 $B/bench_swiglu --grouped 32 --reps 10 --modes block,block_mn --json $O/gswiglu.jsonl --commit wip > $O/t/bench.log 2>&1
echo "bench rc=$?" >> $S
cat $O/t/bench.log >> $S
tar czf $O/logs.tgz -C $O t && rm -rf $O/t
echo total $(( $(date +%s) - t0 )) s >> $S
cat $S
