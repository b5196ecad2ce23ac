#!/usr/bin/env bash
# sweep_widths.sh - bench/sweep_dense.sh's shapes with every tile width forced: one sweep_dense.sh
# process per tuning (gemm_bn = 64 / 128 / 192 / 256, each with the stream-K tail off and left to
# the planner), and one with no tuning (the planner's own plan), cuBLASLt timed beside each row.
# Every JSON row carries its tuning in "tag" and the plan fp8kit_gemm_describe gave in "plan", so
# the planner's weights can be checked against the fastest forced plan per shape
# (bench/sweep_widths_report.py; docs/perf.md, "How the planner chooses"). A forced width that no
# variant of the row's design has is dropped by the planner (the row then shows its own pick).
# Setting gemm_bn also keeps M <= 128 off the small-M family.
# Usage (repository root, on the GPU machine, CUDA build in BUILD):
#   bash bench/sweep_widths.sh [BUILD [OUT_JSON]]
# Env: FK_SWEEP_M (default 256,384,512,1024), FK_SWEEP_MODES (default tensor,tensor_fast),
#      FK_SWEEP_REPS (default 10), FK_SWEEP_WIDTHS (default 64 128 192 256), FK_SWEEP_MODELS
#      (as sweep_dense.sh).
set -euo pipefail
build=${1:-build}
out=${2:-bench/results/sweep-widths-$(date -u +%F).jsonl}
export FK_SWEEP_M=${FK_SWEEP_M:-256,384,512,1024} FK_SWEEP_MODES=${FK_SWEEP_MODES:-tensor,tensor_fast}
export FK_SWEEP_REPS=${FK_SWEEP_REPS:-10}
here=$(dirname "$0")
run() { # TAG [TUNING]: one sweep_dense.sh process (its later --tag replaces sweep_dense's)
    FK_SWEEP_ARGS="--tag $1${2:+ --tuning $2}" bash "$here/sweep_dense.sh" "$build" "$out"
}
run default
for bn in ${FK_SWEEP_WIDTHS:-64 128 192 256}; do
    run "gemm_bn=$bn,gemm_sk=0" "gemm_bn=$bn,gemm_sk=0"
    run "gemm_bn=$bn" "gemm_bn=$bn"
done
echo "sweep_widths: $(grep -c . "$out") rows in $out"
