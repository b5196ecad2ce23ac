#!/usr/bin/env bash
# gpu_check.sh - the full check of fp8kit on one Hopper GPU (sm_90a), in one run.
#
# Steps (FK_STEPS picks a subset; each writes its log to the output folder):
#   build     configure and build the CUDA tree: Release, -gencode for sm_90a only,
#             FP8KIT_SAFETENSORS=ON when jansson is found (see below), -j$(nproc).
#   tests     the whole CTest suite: GPU tests against the CPU backend, CPU tests,
#             the Python tests with torch on the GPU, CLI and safetensors tests.
#             Not run: tests matching FK_CTEST_EXCLUDE (default test_consumers,
#             which needs network access to build its virtual environment).
#   sanitize  compute-sanitizer on the reduced case sets (each test's --small):
#             memcheck on test_cuda_quant, test_cuda_gemm, test_cuda_gemm_small,
#             test_cuda_gemm_mx, test_cuda_grouped; racecheck on test_cuda_quant and
#             test_cuda_gemm_small.
#   bench     every benchmark with its peer measured in the same run:
#             bench_gemm (cuBLASLt; large shapes, every scale mode, bias + gelu,
#             and the M <= 128 section), bench_grouped + torch_grouped_peer.py
#             (torch._scaled_grouped_mm), bench_quant (device copy) +
#             torch_quant_peer.py, bench_outq (bf16 GEMM + separate quantize),
#             bench_launch (bare cuLaunchKernelEx), python/bench_overhead.py
#             (torch._scaled_mm). The torch parts are skipped when torch cannot
#             use the GPU.
#
# Output folder (first argument, else $OUT, else ./gpu-check-out):
#   summary.txt    one line per test / sanitizer run / bench with its exit status
#   env.txt        GPU, driver, clocks, power limit, nvcc, cmake, torch, commit
#   results.jsonl  every JSON row of the benches (op, case, shape, ours, peer,
#                  peer_name, ratio, unit, device, date, commit)
#   0-logs.tar.gz  all logs and the per-bench JSON lines (FK_KEEP_LOGS=1 leaves them
#                  as files instead; the archive keeps the folder at four files,
#                  for tools that copy back only a few)
#
# Usage, from the repository root on the GPU machine:
#   bash bench/gpu_check.sh [OUT_DIR]
#   FK_STEPS=bench bash bench/gpu_check.sh out2     # benches only, on the existing build
# Environment:
#   FK_STEPS          steps to run, default "build tests sanitize bench"
#   FK_BUILD          build folder (default build-gpu; rebuilt incrementally)
#   FK_COMMIT         commit recorded in the JSON rows (default: git rev-parse, else unknown)
#   FK_BENCH_ARGS     bench_gemm flags (default --small: every shape and mode, then M <= 128)
#   FK_CTEST_EXCLUDE  CTest -E regex (default ^test_consumers$)
#   FK_CTEST_JOBS     parallel CTest jobs (default 4)
#   FK_KEEP_LOGS=1    do not pack the logs
# Without libjansson-dev on the machine: put the Debian packages libjansson4 and
# libjansson-dev (.deb) in devbin/, or the tree `dpkg-deb -x` makes of them in
# devbin/jansson/ (devbin/ is git-ignored; copy it along with the tree). CMake,
# pkg-config and the loader are pointed at it. Without pytest: its wheels and
# those of its dependencies in .whl/ are installed into a temporary folder.
# Exit status 0 when every step passed.
#
# Profiling helpers (bench/profile/) source this file with `--lib`: it then only
# sets up the environment (OUT, stamp, fk_build, library paths) and returns.
set -u

# --- environment ---------------------------------------------------------------

T0=$(date +%s)
stamp() { echo "[+$(($(date +%s) - T0))s] $*"; }

# fk_jansson: use the system's jansson, else the one in devbin/ (exported:
# PKG_CONFIG_LIBDIR with a jansson.pc that names devbin's absolute paths, and the
# loader path; without pkg-config, FK_JANSSON_CMAKE holds the cache entries for
# CMake's find_path / find_library fallback).
FK_JANSSON_CMAKE=""
fk_jansson() {
    if pkg-config --exists jansson 2>/dev/null || [ -e /usr/include/jansson.h ]; then return 0; fi
    local d=$PWD/devbin/jansson f lib pcdir
    if [ ! -e "$d/usr/include/jansson.h" ]; then
        for f in devbin/libjansson*.deb; do
            [ -e "$f" ] && dpkg-deb -x "$f" "$d"
        done
    fi
    [ -e "$d/usr/include/jansson.h" ] || return 1
    lib=$(dirname "$(find "$d/usr/lib" -name 'libjansson.so' | head -1)")
    export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    if command -v pkg-config >/dev/null && [ -e "$lib/pkgconfig/jansson.pc" ]; then
        # PKG_CONFIG_LIBDIR, not PKG_CONFIG_PATH: tests/test_install.sh sets the latter
        pcdir=${TMPDIR:-/tmp}/fk-jansson-pc
        mkdir -p "$pcdir"
        sed "s|^prefix=.*|prefix=$d/usr|" "$lib/pkgconfig/jansson.pc" >"$pcdir/jansson.pc"
        PKG_CONFIG_LIBDIR="$pcdir:$(pkg-config --variable pc_path pkg-config)"
        export PKG_CONFIG_LIBDIR
    else # no pkg-config: CMake's fallback (find_path / find_library) gets the paths
        FK_JANSSON_CMAKE="-DFK_JANSSON_INCLUDE=$d/usr/include -DFK_JANSSON_LIBRARY=$lib/libjansson.so"
    fi
    echo "jansson: from $d"
}

# fk_pytest: pytest for python3, from the wheels in .whl/ when it is not installed.
fk_pytest() {
    python3 -c 'import pytest' 2>/dev/null && return 0
    local site=${TMPDIR:-/tmp}/fk-site
    ls .whl/*.whl >/dev/null 2>&1 || return 1
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl >/dev/null 2>&1 || return 1
    export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
    python3 -c 'import pytest' 2>/dev/null
}

fk_env_setup() {
    mkdir -p "$OUT"
    export PATH=/usr/local/cuda/bin:$PATH
    # cuBLASLt from the nvidia-cublas wheel when torch brought one, else the toolkit's
    local cublas_dir
    cublas_dir=$(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null)
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64${cublas_dir:+:$cublas_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PYTHONUNBUFFERED=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
    fk_jansson || echo "jansson: not found (no libjansson-dev, nothing in devbin/): building without safetensors"
    {
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv,noheader 2>&1
        echo "commit: ${FK_COMMIT:-unknown}, date: $(date -u +%Y-%m-%d)"
        nvcc --version 2>/dev/null | tail -1
        cmake --version 2>/dev/null | head -1
        python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>/dev/null || echo "torch: not importable"
    } | tee "$OUT/env.txt"
}

# fk_build BUILD_DIR [TARGET...]: configure (Release, sm_90a) and build those
# targets (all without any) into BUILD_DIR, the log in $OUT/build.log; returns 1
# with the log's tail printed when the build fails.
fk_build() {
    local b=$1 st="" targets=()
    shift
    [ $# = 0 ] || targets=(--target "$@")
    stamp "build $b ${*:-(all)}"
    [ -n "$FK_JANSSON_CMAKE" ] || [ -e /usr/include/jansson.h ] || pkg-config --exists jansson 2>/dev/null || st=OFF
    # shellcheck disable=SC2086
    cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA=ON \
        "-DFP8KIT_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" \
        -DFP8KIT_SAFETENSORS=${st:-ON} $FK_JANSSON_CMAKE >"$OUT/build.log" 2>&1 &&
        cmake --build "$b" -j "$(nproc)" ${targets[@]+"${targets[@]}"} >>"$OUT/build.log" 2>&1 ||
        { stamp "build failed"; tail -40 "$OUT/build.log"; return 1; }
}

if [ "${1:-}" = "--lib" ]; then
    OUT=${OUT:-$PWD/profile-out}
    fk_env_setup
    return 0 2>/dev/null || { echo "gpu_check.sh --lib is meant to be sourced" >&2; exit 2; }
fi

# --- the check -----------------------------------------------------------------

OUT=${1:-${OUT:-$PWD/gpu-check-out}}
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac
[ -n "${FK_COMMIT:-}" ] || FK_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
export FK_COMMIT
B=${FK_BUILD:-build-gpu}
STEPS=" ${FK_STEPS:-build tests sanitize bench} "
fk_env_setup
: >"$OUT/summary.txt"
failed=0
# note NAME STATUS [DETAIL]: one summary line; a status other than 0 (or 77, skipped) fails the check
note() {
    echo "$1: exit $2${3:+ : $3}" | tee -a "$OUT/summary.txt"
    case $2 in 0 | 77) ;; *) failed=1 ;; esac
}
has_torch_gpu() { python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; }

if [[ $STEPS == *" build "* ]]; then
    fk_build "$B"
    note build $?
    grep -E "spill" "$OUT/build.log" | grep -v " 0 bytes spill" | sort -u | head -5
    [ -x "$B/test_cuda_gemm" ] || { stamp "no CUDA build in $B: stopping"; cat "$OUT/summary.txt"; exit 1; }
fi
[ -d "$B" ] || { echo "no build folder $B (run the build step first)"; exit 1; }
export FP8KIT_LIBRARY=$PWD/$B/libfp8kit.so

if [[ $STEPS == *" tests "* ]]; then
    stamp "CTest (all tests but ${FK_CTEST_EXCLUDE:-^test_consumers\$})"
    fk_pytest || echo "pytest: not importable and no wheels in .whl/: test_python will fail"
    ctest --test-dir "$B" -j "${FK_CTEST_JOBS:-4}" --output-on-failure --timeout 900 \
        -E "${FK_CTEST_EXCLUDE:-^test_consumers\$}" >"$OUT/ctest.log" 2>&1
    note ctest $? "$(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
    grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess|Not Run|Exception)" "$OUT/ctest.log" | tee -a "$OUT/summary.txt"
    grep -E "Test +#[0-9]+: .*(Passed|Failed|Skipped|Not Run|Timeout)" "$OUT/ctest.log" | sed 's/^ *[0-9]*\/[0-9]* //' >"$OUT/ctest-list.txt"
fi

if [[ $STEPS == *" sanitize "* ]]; then
    if command -v compute-sanitizer >/dev/null; then
        for run in memcheck:test_cuda_quant memcheck:test_cuda_gemm memcheck:test_cuda_gemm_small \
            memcheck:test_cuda_gemm_mx memcheck:test_cuda_grouped \
            racecheck:test_cuda_quant racecheck:test_cuda_gemm_small; do
            tool=${run%%:*} t=${run#*:}
            stamp "compute-sanitizer $tool $t --small"
            timeout 600 compute-sanitizer --tool "$tool" --error-exitcode 9 "$B/$t" --small \
                >"$OUT/$tool-$t.log" 2>&1
            note "$tool $t" $? "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed, [0-9]+ failed' "$OUT/$tool-$t.log" | tr '\n' ' ')"
        done
    else
        note compute-sanitizer 1 "not on PATH"
    fi
fi

if [[ $STEPS == *" bench "* ]]; then
    c=$FK_COMMIT
    stamp "bench_gemm ${FK_BENCH_ARGS:---small}"
    # shellcheck disable=SC2086
    timeout 1200 "$B/bench_gemm" --json "$OUT/gemm.jsonl" --commit "$c" ${FK_BENCH_ARGS:---small} >"$OUT/bench_gemm.log" 2>&1
    note bench_gemm $?
    grep -vE "^#|^$" "$OUT/bench_gemm.log" | tail -60

    stamp "bench_grouped"
    timeout 300 "$B/bench_grouped" --json "$OUT/grouped.jsonl" --commit "$c" >"$OUT/bench_grouped.log" 2>&1
    note bench_grouped $?
    stamp "bench_quant"
    timeout 300 "$B/bench_quant" "$OUT/quant.jsonl" >"$OUT/bench_quant.log" 2>&1
    note bench_quant $?
    grep -v '^JSON' "$OUT/bench_quant.log" | tail -40
    stamp "bench_outq"
    timeout 300 "$B/bench_outq" --json "$OUT/outq.jsonl" --commit "$c" >"$OUT/bench_outq.log" 2>&1
    note bench_outq $?
    tail -15 "$OUT/bench_outq.log"
    stamp "bench_launch"
    timeout 120 "$B/bench_launch" --json "$OUT/launch.jsonl" --commit "$c" >"$OUT/bench_launch.log" 2>&1
    note bench_launch $?
    tail -8 "$OUT/bench_launch.log"

    if has_torch_gpu; then
        stamp "torch peers"
        timeout 300 python3 bench/torch_grouped_peer.py "$OUT/grouped.jsonl" "$OUT/grouped_torch.jsonl" \
            >"$OUT/torch_grouped_peer.log" 2>&1
        note torch_grouped_peer $?
        tail -10 "$OUT/torch_grouped_peer.log"
        timeout 300 python3 bench/torch_quant_peer.py "$OUT/quant_torch.jsonl" >"$OUT/torch_quant_peer.log" 2>&1
        note torch_quant_peer $?
        grep -v '^{' "$OUT/torch_quant_peer.log" | tail -10
        timeout 300 python3 python/bench_overhead.py --json "$OUT/overhead.jsonl" >"$OUT/bench_overhead.log" 2>&1
        note bench_overhead $?
        tail -10 "$OUT/bench_overhead.log"
    else
        note "torch peers" 77 "torch cannot use the GPU: skipped"
    fi
    for f in "$OUT"/*.jsonl; do [ "$f" = "$OUT/results.jsonl" ] || cat "$f"; done >"$OUT/results.all"
    mv "$OUT/results.all" "$OUT/results.jsonl"
fi

stamp "done"
cat "$OUT/summary.txt"
if [ -z "${FK_KEEP_LOGS:-}" ]; then
    (cd "$OUT" && find . -maxdepth 1 -type f ! -name summary.txt ! -name env.txt ! -name results.jsonl \
        ! -name 0-logs.tar.gz -printf '%P\n' | tar czf 0-logs.tar.gz -T - --remove-files)
fi
exit $failed
