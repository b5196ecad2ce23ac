#!/bin/bash
# s25 call 9: the consumer lag on the paired gated tile (gemm_lag 0, 1, 2), dense and grouped, block scales.
cd "$(dirname "$0")/.."
O=${OUT:-/tmp/out}; mkdir -p $O
B=devbin/s
export LD_LIBRARY_PATH=$PWD/$B
for L in 0 1 2; do
  echo "== gemm_lag=$L" >> $O/0-summary.txt
  timeout 100 $B/bench_swiglu --reps 10 --modes block,row --tuning gemm_lag=$L --json $O/swiglu-lag$L.jsonl --commit a0ef86e >> $O/0-summary.txt 2>&1
  timeout 100 $B/bench_swiglu --grouped 32 --reps 10 --modes block --tuning gemm_lag=$L --json $O/gswiglu-lag$L.jsonl --commit a0ef86e >> $O/0-summary.txt 2>&1
done
cat $O/0-summary.txt
