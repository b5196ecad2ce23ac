#!/bin/bash
# ncu_targets.sh - the bottleneck behind each GEMM speed target that is not met,
# with Nsight Compute: for every case (shape + bench_gemm modes) profiles our
# kernels and cuBLASLt's from one bench_gemm run (SpeedOfLight, compute and
# memory workload, warp states, scheduler) and prints per kernel: time, SM
# clock, active cycles, issue-slot use, the busiest pipes (tensor = gmma,
# xu = MUFU), L2 / DRAM throughput, DRAM bytes and the top warp stall reasons.
# Raw CSVs go to $OUT (the reports too with FK_NCU_KEEP=1), the summaries to
# $OUT/0-ncu-summary.txt (named to come back first: the device tool returns
# 8 files). ncu locks the clocks to base, so compare
# kernels within a case, not with bench_gemm's free-running times.
# Usage (repo root, on the device): OUT=dir [FK_NCU_CASES="SHAPE:MODES ..."] bash bench/profile/ncu_targets.sh [BUILD_DIR]
set -u
. "$(dirname "$0")/../gpu_check.sh" --lib
B=${1:-build-dev}
[ -x "$B/bench_gemm" ] || fk_build "$B" bench_gemm || exit 1
# SHAPE:MODES; SHAPE:small profiles the small-M section (small-M kernel,
# general kernel, cuBLASLt) for that M <= 128 shape
for c in ${FK_NCU_CASES:-4096x4096x4096:tensor 4096x4096x4096:tensor_fast 8192x8192x8192:bias_gelu 128x2112x7168:tensor}; do
    shp=${c%%:*}
    modes=${c#*:}
    tag=$shp-${modes//,/_}
    if [ "$modes" = small ]; then
        args="--small-only --small-shapes $shp"
    else
        args="--shapes $shp --modes $modes"
    fi
    stamp "ncu $tag"
    timeout 240 ncu --kernel-name "regex:fk_gemm|fk_small|nvjet|xmma|cutlass" --launch-count 40 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section SchedulerStats --section LaunchStats \
        -o "$OUT/ncu-$tag" -f "$B/bench_gemm" --reps 1 $args >"$OUT/ncu-$tag.txt" 2>&1
    echo "ncu exit $?"
    ncu -i "$OUT/ncu-$tag.ncu-rep" --page raw --csv >"$OUT/raw-$tag.csv" 2>/dev/null
    python3 "$(dirname "$0")/ncu_summary.py" "$OUT/raw-$tag.csv" | tee -a "$OUT/0-ncu-summary.txt"
    [ -n "${FK_NCU_KEEP:-}" ] || rm -f "$OUT/ncu-$tag.ncu-rep" # (large; FK_NCU_KEEP=1 keeps the reports)
done
stamp done
