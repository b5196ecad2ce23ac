#!/usr/bin/env bash
# device_all.sh - the end-of-session check of everything GPU in one device
# call: builds the tree on the device (Release, sm_90a, -j16), runs every GPU
# test against the CPU oracle (quantize, GEMM - also with 2-CTA clusters
# forced and with no consumer lag -, small-M GEMM, autotune, accuracy vs
# cuBLASLt, repeated-call shortcut, threads), compute-sanitizer memcheck on
# the reduced GEMM tests, the Python tests with torch on the GPU, then the
# benchmarks (bench_gemm on a reduced shape list unless
# FK_BENCH_ARGS says otherwise, bench_launch, the Python call overhead,
# bench_grouped with the torch._scaled_grouped_mm peer, which kernel the planner gives a few
# decode shapes (fp8kit gemm, checked), fp8kit bench --quick). Logs and JSON lines go to $OUT;
# at the end the logs are packed into $OUT/0-logs.tar.gz (the device tool returns 8 files).
# Usage (repo root, on the device): bash bench/device_all.sh [COMMIT]
# Env: FK_SKIP_SANITIZE=1, FK_SKIP_BENCH=1, FK_SKIP_PY=1, FK_BENCH_ARGS (bench_gemm
# flags), FK_TESTS (the GPU test list).
set -u
commit=${1:-unknown}
. "$(dirname "$0")/device_env.sh"

B=build-dev
stamp "build"
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA=ON \
    "-DFP8KIT_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" >"$OUT/build.log" 2>&1 &&
    cmake --build $B -j16 >>"$OUT/build.log" 2>&1 || { stamp "build failed"; tail -40 "$OUT/build.log"; exit 1; }
grep -E "spill|Used [0-9]+ registers" "$OUT/build.log" | grep -v " 0 bytes spill" | head -5

stamp "GPU tests"
: >"$OUT/summary.txt"
# an entry NAME@VAR=VAL:VAR=VAL runs test NAME with those variables set
for t in ${FK_TESTS:-test_cuda_quant test_mx_both test_cuda_gemm test_cuda_gemm@FK_GEMM_CLUSTER=2 \
         test_cuda_gemm@FK_GEMM_LAG=0 test_cuda_gemm_small test_cuda_gemm_mx test_cuda_grouped test_grouped test_tune \
         test_cuda_vs_cublaslt test_gemm_repeat test_threads test_api}; do
    FK_TEST_LARGE=${FK_TEST_LARGE:-0} fk_run_test "$t" "$B" 300
done
grep -E "^(shape|[0-9]+x)" "$OUT/test_cuda_vs_cublaslt.log" | head -60

if [ -z "${FK_SKIP_SANITIZE:-}" ]; then
    stamp "compute-sanitizer memcheck (FK_TEST_SMALL=1)"
    for t in test_cuda_gemm test_cuda_gemm_small test_cuda_gemm_mx test_cuda_grouped; do
        FK_TEST_SMALL=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/$t" >"$OUT/memcheck_$t.log" 2>&1
        echo "memcheck $t exit $? : $(grep 'ERROR SUMMARY' "$OUT/memcheck_$t.log" | tail -1)" | tee -a "$OUT/summary.txt"
    done
fi

if [ -z "${FK_SKIP_PY:-}" ]; then
stamp "python tests (torch on the GPU)"
if [ -d .whl ] && ! python3 -c 'import pytest' 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export FP8KIT_LIBRARY=$PWD/$B/libfp8kit.so PYTHONUNBUFFERED=1
PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 timeout 300 python3 -m pytest -q -p no:cacheprovider python/tests >"$OUT/pytest.log" 2>&1
echo "pytest exit $? : $(tail -1 "$OUT/pytest.log")" | tee -a "$OUT/summary.txt"
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20
fi

if [ -z "${FK_SKIP_BENCH:-}" ]; then
    stamp "bench_launch"
    timeout 120 "$B/bench_launch" >"$OUT/bench_launch.log" 2>&1
    echo "bench_launch exit $?" | tee -a "$OUT/summary.txt"
    tail -12 "$OUT/bench_launch.log"
    stamp "python call overhead"
    FK_COMMIT=$commit timeout 120 python3 python/bench_overhead.py >"$OUT/overhead.log" 2>&1
    echo "bench_overhead exit $?" | tee -a "$OUT/summary.txt"
    tail -10 "$OUT/overhead.log"
    stamp "bench_gemm"
    timeout 300 "$B/bench_gemm" --json "$OUT/gemm.jsonl" --commit "$commit" \
        ${FK_BENCH_ARGS:---shapes 8192x8192x8192,4096x4096x4096,64x7168x7168} >"$OUT/bench_gemm.log" 2>&1
    echo "bench_gemm exit $?" | tee -a "$OUT/summary.txt"
    cat "$OUT/bench_gemm.log" | tail -40
    stamp "bench_grouped + torch._scaled_grouped_mm peer"
    timeout 200 "$B/bench_grouped" --json "$OUT/grouped.jsonl" --commit "$commit" >"$OUT/bench_grouped.log" 2>&1
    echo "bench_grouped exit $?" | tee -a "$OUT/summary.txt"
    FK_COMMIT=$commit timeout 200 python3 bench/torch_grouped_peer.py "$OUT/grouped.jsonl" "$OUT/grouped_peer.jsonl" \
        >"$OUT/grouped_peer.log" 2>&1
    echo "torch_grouped_peer exit $?" | tee -a "$OUT/summary.txt"
    tail -12 "$OUT/grouped_peer.log"
    stamp "planner routes (which kernel the default plan runs; rel_err checked by fp8kit gemm)"
    for shp in "64 24576 1536" "64 32768 2048" "64 12288 2048" "128 7168 16384" "128 7168 2048" "1 2112 7168"; do
        set -- $shp
        echo "M=$1 N=$2 K=$3: $(FK_GEMM_VERBOSE=1 FK_SMALL_DEBUG=1 timeout 60 "$B/fp8kit" gemm --m $1 --n $2 --k $3 \
            --backend cuda --reps 20 --ref-rows 16 2>&1 | grep -E "plan|rel_err|error" | tr '\n' ' ' | cut -c1-400)"
    done | tee "$OUT/routes.log"
    stamp "fp8kit bench --quick"
    timeout 120 "$B/fp8kit" bench --quick --backend cuda >"$OUT/bench_quick.log" 2>&1
    echo "bench --quick exit $?" | tee -a "$OUT/summary.txt"
fi
stamp "done"
cat "$OUT/summary.txt"
# The device tool brings back at most 8 files: every log goes into one archive
# (named to sort first), and only the summary, the JSON lines and env.txt stay beside it.
(cd "$OUT" && tar czf /tmp/fk-logs.tar.gz --exclude='*.ncu-rep' . && rm -f ./*.log &&
    mv /tmp/fk-logs.tar.gz 0-logs.tar.gz)
