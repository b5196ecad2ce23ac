#!/usr/bin/env bash
# run_tests.sh - quick start, command 2 of 2 (and what CI runs): installs what
# is missing (scripts/bootstrap.sh), configures and builds fp8kit with its
# tests (Release; the CUDA backend too when nvcc is present, so CI compiles the
# kernels even without a GPU), then runs CTest. GPU tests skip (exit 77) on a
# machine without a GPU. Exits non-zero when any test fails.
# Usage: scripts/run_tests.sh [extra ctest options, e.g. -R test_cli]
# Environment: FP8KIT_BUILD_DIR (default build), FP8KIT_CUDA (AUTO|ON|OFF),
#              FP8KIT_SANITIZE (ON for ASan/UBSan), JOBS (default: number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh

build="${FP8KIT_BUILD_DIR:-build}"
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export CUDACXX=/usr/local/cuda/bin/nvcc
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA="${FP8KIT_CUDA:-AUTO}" \
    -DFP8KIT_SANITIZE="${FP8KIT_SANITIZE:-OFF}" -DFP8KIT_TESTS=ON
cmake --build "$build" -j "${JOBS:-$(nproc)}"

cd "$build"
exec ctest -j2 --output-on-failure "$@"
