#!/bin/bash
# device_gemm.sh - everything the GPU GEMM needs from one device call: uses the
# binaries carried in BUILD (or builds them there, Release, sm_90a only, -j16
# when they are missing or do not start), dumps SASS facts (QGMMA count,
# local-memory traffic), runs tests/test_cuda_gemm, compute-sanitizer memcheck
# on its small shapes, and bench_gemm (JSON lines). Logs go to $OUT.
# FK_BENCH_ARGS adds bench_gemm flags (e.g. --shapes 8192x8192x8192 --modes
# tensor,bias_gelu); FK_NCU_SHAPE=MxNxK[:mode] profiles our kernel on that
# shape with ncu (SOL + warp-state sections) into $OUT/ncu.txt.
# Usage (repo root, on the device): bash bench/device_gemm.sh [test|bench|all|ncu] [BUILD] [COMMIT]
set -u
what=${1:-all}
build=${2:-build-gemm}
commit=${3:-unknown}
OUT=${OUT:-/tmp/fk_device_out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/smi.txt"

cublas_dir=$(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${cublas_dir:-/nonexistent}:${LD_LIBRARY_PATH:-}
need_build=0
for b in test_cuda_gemm bench_gemm; do
    if [ ! -x "$build/$b" ] || ldd "$build/$b" | grep -q "not found"; then need_build=1; fi
done
if [ $need_build = 1 ]; then
    echo "== building on the device"
    build=build-dev
    cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA=ON \
        "-DFP8KIT_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" >"$OUT/cmake.log" 2>&1 || tail -20 "$OUT/cmake.log"
    cmake --build $build -j16 --target test_cuda_gemm bench_gemm >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
fi

if [ "$what" = test ] || [ "$what" = all ]; then
    obj=$(find "$build" -name 'gemm_sm90.cu.o' | head -1)
    if [ -n "$obj" ] && command -v cuobjdump >/dev/null; then
        cuobjdump --dump-sass "$obj" >"$OUT/sass.txt" 2>&1
        echo "== SASS: QGMMA $(grep -c QGMMA "$OUT/sass.txt"), LDL $(grep -c 'LDL' "$OUT/sass.txt"), STL $(grep -c 'STL' "$OUT/sass.txt"), UTMALDG $(grep -c UTMALDG "$OUT/sass.txt")"
        grep -m 3 QGMMA "$OUT/sass.txt"
        gzip -f "$OUT/sass.txt"
    else
        echo "== SASS: no object or no cuobjdump ($obj)"
    fi
    echo "== test_cuda_gemm"
    timeout 120 "$build/test_cuda_gemm" 2>&1 | tee "$OUT/test.log"
    trc=${PIPESTATUS[0]}
    echo "test rc=$trc"
    if [ $trc -ge 124 ]; then echo "test timed out or crashed: stopping"; exit 1; fi
    echo "== compute-sanitizer memcheck (FK_TEST_SMALL=1)"
    FK_TEST_SMALL=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/test_cuda_gemm" >"$OUT/memcheck.log" 2>&1
    echo "memcheck rc=$?"
    tail -6 "$OUT/memcheck.log"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
    echo "== bench_gemm"
    FK_COMMIT=$commit timeout 240 "$build/bench_gemm" --json "$OUT/gemm.jsonl" --commit "$commit" ${FK_BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
fi
if [ -n "${FK_NCU_SHAPE:-}" ] && command -v ncu >/dev/null; then
    shp=${FK_NCU_SHAPE%%:*}
    mode=tensor
    case "$FK_NCU_SHAPE" in *:*) mode=${FK_NCU_SHAPE#*:} ;; esac
    echo "== ncu $shp $mode"
    timeout 200 ncu --kernel-name regex:fk_gemm_sm90 --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis \
        --section MemoryWorkloadAnalysis --section SchedulerStats \
        "$build/bench_gemm" --reps 20 --shapes "$shp" --modes "$mode" >"$OUT/ncu.txt" 2>&1
    echo "ncu rc=$?"
    grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|Stall|Issue Slots Busy|No Eligible|Warp Cycles Per Issued" "$OUT/ncu.txt" | head -40
fi
