#!/usr/bin/env bash
# small_m.sh - one device call for the small-M (decode) GEMM work: builds
# test_cuda_gemm_small and bench_gemm (Release, sm_90a, -j16, build dir
# outside the tree), runs the small-M bench section on the decode shapes
# (JSON lines to $OUT/small.jsonl), the test, compute-sanitizer memcheck on
# its reduced set, then optional experiments.
# Usage (repo root or worktree, on the device): bash bench/profile/small_m.sh COMMIT
# Env: FK_EXTRA_RUNS="label:TUNING:bench flags;..." extra bench runs, each
#      with bench_gemm --tuning TUNING (docs/tuning.md, e.g.
#      small_stages=6,small_pf=2; the small-M section's gemm_small and sweep
#      keys are applied after it), FK_SKIP_TEST=1, FK_NCU="bench flags" (ncu
#      on the first small kernel).
set -u
commit=${1:-unknown}
. "$(dirname "$0")/../gpu_check.sh" --lib
B=/tmp/build-small
SHAPES=64x7168x7168,128x2112x7168,128x7168x16384,1x7168x7168,16x7168x7168,32x7168x7168
stamp "build"
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA=ON \
    "-DFP8KIT_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" >"$OUT/build.log" 2>&1 &&
    cmake --build $B -j16 --target test_cuda_gemm_small bench_gemm >>"$OUT/build.log" 2>&1 ||
    { stamp "build failed"; tail -40 "$OUT/build.log"; exit 1; }
stamp "bench"
timeout 120 $B/bench_gemm --small-only --shapes $SHAPES --date 2026-11-22 --commit "$commit" \
    --json "$OUT/small.jsonl" >"$OUT/bench.log" 2>&1
echo "bench exit $?"
sed -n '/small M:/,$p' "$OUT/bench.log"
if [ -z "${FK_SKIP_TEST:-}" ]; then
    stamp "test"
    timeout 200 $B/test_cuda_gemm_small >"$OUT/test.log" 2>&1
    echo "test exit $? : $(grep -E 'passed, [0-9]+ failed' "$OUT/test.log" | tail -1)"
    grep -E "FAIL|differ|error" "$OUT/test.log" | head -10
    stamp "memcheck"
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_gemm_small --small \
        >"$OUT/memcheck.log" 2>&1
    echo "memcheck exit $? : $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
fi
IFS=';' read -ra runs <<<"${FK_EXTRA_RUNS:-}"
for r in "${runs[@]}"; do
    label=${r%%:*}; rest=${r#*:}; spec=${rest%%:*}; flags=${rest#*:}
    stamp "extra $label (--tuning $spec) $flags"
    timeout 120 $B/bench_gemm --tuning "$spec" --small-only --date 2026-11-22 --commit "$commit" --tag "$label" \
        --json "$OUT/extra_$label.jsonl" $flags >"$OUT/extra_$label.log" 2>&1
    sed -n '/small M:/,$p' "$OUT/extra_$label.log" | grep -v "^graph\|^small M"
done
if [ -n "${FK_NCU:-}" ]; then
    # per-SM activity spread (tail imbalance) and DRAM use of the first
    # kernel of ours and of cuBLASLt on the shape, clocks and caches as in
    # a plain run
    M=sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.avg,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__t_sector_hit_rate.pct
    for k in fk_small 'nvjet|xmma|cutlass'; do
        stamp "ncu $k"
        timeout 120 ncu --clock-control none --cache-control none --metrics $M -k "regex:$k" -c 1 \
            $B/bench_gemm --small-only $FK_NCU >"$OUT/ncu_${k%%|*}.log" 2>&1
        grep -E "^  [a-z_0-9]+<|^  [A-Za-z_].*\(|sm__|gpu__|dram__|lts__" "$OUT/ncu_${k%%|*}.log" | head -12
    done
fi
(cd "$OUT" && tar czf logs.tgz --remove-files *.log extra_*.jsonl 2>/dev/null)
stamp "done"
