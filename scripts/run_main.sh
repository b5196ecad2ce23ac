#!/usr/bin/env bash
# run_main.sh - quick start, command 1 of 2: installs what is missing
# (scripts/bootstrap.sh), configures and builds fp8kit (Release; the CUDA
# backend too when nvcc is present), prints `fp8kit info` and runs
# `fp8kit bench --quick` on the best backend available (GPU if present, else CPU).
# Usage: scripts/run_main.sh [extra `fp8kit bench` options, e.g. --json]
# Environment: FP8KIT_BUILD_DIR (default build), FP8KIT_CUDA (AUTO|ON|OFF),
#              JOBS (parallel compile jobs, default: number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh

build="${FP8KIT_BUILD_DIR:-build}"
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export CUDACXX=/usr/local/cuda/bin/nvcc
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA="${FP8KIT_CUDA:-AUTO}"
cmake --build "$build" -j "${JOBS:-$(nproc)}"

echo
"$build/fp8kit" info
echo
exec "$build/fp8kit" bench --quick "$@"
