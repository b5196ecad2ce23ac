#!/usr/bin/env bash
# device_check.sh - one end-to-end check of a CUDA build on a GPU machine: runs
# every test binary of a prebuilt build directory (GPU tests against the CPU
# oracle, the CPU tests too), the Python tests with the torch/CUDA paths, the
# Python call-overhead bench, and `fp8kit bench --quick` on the GPU. Logs go to
# $OUT (or ./device-out). Env: FK_TEST_LARGE=0 (skip the > 2^31-element case),
# FK_SKIP_SANITIZE=1, FK_PYTESTS (pytest paths; default python/tests). Build here first (cmake -DFP8KIT_CUDA=ON), copy the
# binaries with `bench/device_check.sh --pack build devbin`, then on the device:
#   bash bench/device_check.sh devbin
set -u
if [ "${1:-}" = "--pack" ]; then # copy what the device needs into an ignored folder
    src=$2 dst=$3
    mkdir -p "$dst"
    # 64 MiB carry limit and ~12 MB of device code per binary: FK_PACK picks the tests
    for f in fp8kit libfp8kit.so* ${FK_PACK:-test_cuda_quant test_cuda_gemm}; do
        cp -a "$src"/$f "$dst"/ 2>/dev/null
    done
    du -sh "$dst"
    exit 0
fi
B=${1:-devbin}
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
T0=$(date +%s)
stamp() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/env.txt"
"$B/fp8kit" info | tee -a "$OUT/env.txt"

stamp "test binaries"
for t in test_cuda_quant test_cuda_gemm test_mx_both test_api test_threads test_quant test_layout test_gemm; do
    [ -x "$B/$t" ] || continue
    FK_TEST_LARGE=${FK_TEST_LARGE:-1} timeout 240 "$B/$t" >"$OUT/$t.log" 2>&1
    echo "$t exit $? : $(grep -E 'passed, [0-9]+ failed' "$OUT/$t.log" | tail -1)" | tee -a "$OUT/summary.txt"
done

if [ -z "${FK_SKIP_SANITIZE:-}" ]; then
stamp "compute-sanitizer memcheck (reduced GPU tests)"
for t in test_cuda_quant test_cuda_gemm; do
    FK_TEST_SMALL=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 "$B/$t" >"$OUT/san_$t.log" 2>&1
    echo "memcheck $t exit $? : $(grep 'ERROR SUMMARY' "$OUT/san_$t.log" | tail -1)" | tee -a "$OUT/summary.txt"
done
fi

stamp "python tests (numpy + torch on the GPU)"
export FP8KIT_LIBRARY=$PWD/$B/libfp8kit.so PYTHONUNBUFFERED=1
timeout 300 python3 -m pytest -q -p no:cacheprovider ${FK_PYTESTS:-python/tests} >"$OUT/pytest.log" 2>&1
echo "pytest exit $? : $(tail -1 "$OUT/pytest.log")" | tee -a "$OUT/summary.txt"
timeout 120 python3 python/bench_overhead.py >"$OUT/overhead.log" 2>&1
echo "bench_overhead exit $?" | tee -a "$OUT/summary.txt"
tail -12 "$OUT/overhead.log"

stamp "fp8kit bench --quick (GPU)"
timeout 180 "$B/fp8kit" bench --quick --backend cuda >"$OUT/bench_quick.log" 2>&1
echo "bench --quick exit $?" | tee -a "$OUT/summary.txt"
cat "$OUT/bench_quick.log"
stamp "done"
cat "$OUT/summary.txt"
