#!/bin/bash
# ncu_source.sh - where the GEMM kernel stalls: builds bench_gemm on the device,
# profiles one fk_gemm_sm90 launch per (shape, mode) with ncu source counters and
# prints the SASS instructions with the most warp-stall samples (ncu_segments.py
# --top; without --top it sums them by code region). Logs under $OUT.
# Usage (repo root, on the device): OUT=dir [FK_NCU_CASES=...] [FK_NCU_KREGEX=kernel name regex]
#        bash bench/profile/ncu_source.sh [BUILD_DIR (one with a built bench_gemm; else build-dev is built)]
set -u
. "$(dirname "$0")/../gpu_check.sh" --lib
B=${1:-build-dev}
[ -x "$B/bench_gemm" ] || fk_build "$B" bench_gemm || exit 1
# FK_NCU_CASES: "SHAPE:MODE SHAPE:MODE ..." (default below)
for sh in ${FK_NCU_CASES:-4096x24576x1536:tensor_fast 8192x8192x8192:tensor}; do
  set -- ${sh/:/ }
  tag=$1-$2
  timeout 150 ncu --kernel-name-base demangled --kernel-name "regex:${FK_NCU_KREGEX:-fk_gemm_sm90}" --launch-skip 3 --launch-count 1 --section SourceCounters --section WarpStateStats -o $OUT/rep-$tag $B/bench_gemm --reps 5 --shapes $1 --modes $2 > $OUT/ncu-$tag.txt 2>&1
  ncu -i $OUT/rep-$tag.ncu-rep --page source --csv --print-source sass > $OUT/src-$tag.csv 2>/dev/null
  python3 "$(dirname "$0")/ncu_segments.py" "$OUT/src-$tag.csv" --top "${FK_NCU_TOP:-25}"
done
