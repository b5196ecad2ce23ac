#!/usr/bin/env bash
# sweep_widths.sh - the dense sweep's N x K with every tile width forced: one bench_gemm process per
# tuning (gemm_bn = 64 / 128 / 192 / 256, each with the stream-K tail off and left to the planner),
# and one with no tuning (the planner's own plan), cuBLASLt timed beside each row. Every JSON row
# carries its tuning in "tag" and the plan fp8kit_gemm_describe gave in "plan", so the planner's
# weights can be checked against the fastest forced plan per shape (docs/perf.md, "How the planner
# chooses"). A forced width that no variant of the row's design has is dropped by the planner
# (the row then shows its own pick). Setting gemm_bn also keeps M <= 128 off the small-M family.
# Usage (repository root, on the GPU machine, CUDA build in BUILD):
#   bash bench/sweep_widths.sh [BUILD [OUT_JSON]]
# Env: FK_SWEEP_M (default 256,384,512,1024), FK_SWEEP_MODES (default tensor,tensor_fast),
#      FK_SWEEP_REPS (default 10), FK_SWEEP_WIDTHS (default 64 128 192 256).
set -euo pipefail
build=${1:-build}
out=${2:-bench/results/sweep-widths-$(date -u +%F).jsonl}
ms=${FK_SWEEP_M:-256,384,512,1024}
modes=${FK_SWEEP_MODES:-tensor,tensor_fast}
# the N x K of bench/sweep_dense.sh (Llama-3 8B / 70B, Qwen3-32B, DeepSeek-V3)
nks="6144x4096 4096x4096 28672x4096 4096x14336 10240x8192 8192x8192 57344x8192 8192x28672
     10240x5120 5120x8192 51200x5120 5120x25600
     1536x7168 24576x1536 576x7168 32768x512 7168x16384 36864x7168 7168x18432 4096x7168 7168x2048"
shapes=""
for m in ${ms//,/ }; do
    for nk in $nks; do
        shapes="${shapes:+$shapes,}${m}x$nk"
    done
done
mkdir -p "$(dirname "$out")"
run() { # TAG [TUNING]
    "$build/bench_gemm" --shapes "$shapes" --modes "$modes" --reps "${FK_SWEEP_REPS:-10}" --json "$out" \
        --tag "$1" ${2:+--tuning "$2"}
}
run default
for bn in ${FK_SWEEP_WIDTHS:-64 128 192 256}; do
    run "gemm_bn=$bn,gemm_sk=0" "gemm_bn=$bn,gemm_sk=0"
    run "gemm_bn=$bn" "gemm_bn=$bn"
done
echo "sweep_widths: $(grep -c . "$out") rows in $out"
