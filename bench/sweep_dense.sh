#!/usr/bin/env bash
# sweep_dense.sh - the dense FP8 GEMM shape sweep against cuBLASLt: every M of
# 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192 against the N x K of the
# linear layers of Llama-3 8B and 70B, Qwen3-32B and DeepSeek-V3 (attention,
# dense MLP and expert MLP), per-tensor scales with precise and with fast
# accumulation, and row scales; one bench_gemm process (cuBLASLt timed beside
# ours in it), one JSON line per row (ours, peer, peer_name, ratio) appended to
# OUT_JSON.
# Usage (repository root, on the GPU machine, CUDA build in BUILD):
#   bash bench/sweep_dense.sh [BUILD [OUT_JSON]]
# Env: FK_SWEEP_M (the M list, comma-separated), FK_SWEEP_MODES (default
#      tensor,tensor_fast,row), FK_SWEEP_REPS (default 20, the least bench_gemm takes), FK_SWEEP_MODELS (a
#      subset of llama8b llama70b qwen32b dsv3), extra bench_gemm arguments in
#      FK_SWEEP_ARGS.
set -euo pipefail
build=${1:-build}
out=${2:-bench/results/sweep-dense-$(date -u +%F).jsonl}
ms=${FK_SWEEP_M:-64,128,256,384,512,1024,2048,4096,8192}
modes=${FK_SWEEP_MODES:-tensor,tensor_fast,row}

# N x K of each model's projections (y = x W^T: N outputs, K inputs)
declare -A nk=(
    [llama8b]="6144x4096 4096x4096 28672x4096 4096x14336"    # qkv, o, gate+up, down
    [llama70b]="10240x8192 8192x8192 57344x8192 8192x28672"  # qkv, o, gate+up, down
    [qwen32b]="10240x5120 5120x8192 51200x5120 5120x25600"   # qkv, o, gate+up, down
    # q_a, q_b, kv_a, kv_b, o, dense gate+up, dense down, expert gate+up, expert down
    [dsv3]="1536x7168 24576x1536 576x7168 32768x512 7168x16384 36864x7168 7168x18432 4096x7168 7168x2048"
)
shapes=""
for model in ${FK_SWEEP_MODELS:-llama8b llama70b qwen32b dsv3}; do
    for p in ${nk[$model]}; do
        for m in ${ms//,/ }; do
            s="${m}x${p}"
            case ",$shapes," in *",$s,"*) ;; *) shapes="${shapes:+$shapes,}$s" ;; esac
        done
    done
done
mkdir -p "$(dirname "$out")"
echo "sweep_dense: $(echo "$shapes" | tr ',' '\n' | wc -l) shapes x {$modes} -> $out"
exec "$build/bench_gemm" --shapes "$shapes" --modes "$modes" --reps "${FK_SWEEP_REPS:-20}" --json "$out" \
    --tag sweep_dense ${FK_SWEEP_ARGS:-}
