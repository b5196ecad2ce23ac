#!/usr/bin/env bash
# test_store_tma_emu.sh - CTest test (no GPU needed): builds tests/emu/store_tma_emu.cpp,
# which compiles the Hopper GEMM TMA-store epilogue (src/cuda/gemm/sm90/store_tma.cuh) as host C++ and
# runs it on 128 emulated threads per warpgroup, dense and grouped tiles (a
# warp whose rows run past its group's end stores them itself), and checks D
# byte for byte against the CPU backend (the shared library next to the CLI). Run by hand as: tests/test_store_tma_emu.sh build/fp8kit
# Exits 77 (skipped) without a C++20 compiler, the CUDA headers or the library.
set -u
cli="${1:-build/fp8kit}"
src="$(cd "$(dirname "$0")/.." && pwd)"
lib="$(dirname "$cli")/libfp8kit.so"
cxx="${CXX:-c++}"
cuda_inc=""
for d in "${CUDA_HOME:-}/include" "$(dirname "$(command -v nvcc 2>/dev/null || echo /x/x)")/../include" /usr/local/cuda/include; do
    if [ -f "$d/vector_types.h" ] && [ -f "$d/cuda.h" ]; then cuda_inc="$d"; break; fi
done
if [ -z "$cuda_inc" ] || [ ! -f "$lib" ] || ! command -v "$cxx" >/dev/null 2>&1; then
    echo "test_store_tma_emu: needs $cxx, the CUDA headers and $lib; skipped"
    exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! echo '#include <barrier>
int main() { std::barrier<> b(1); b.arrive_and_wait(); }' | "$cxx" -std=c++20 -x c++ - -o "$tmp/probe" -pthread 2>/dev/null; then
    echo "test_store_tma_emu: $cxx has no C++20 <barrier>; skipped"
    exit 77
fi
"$cxx" -std=c++20 -O1 -Wall -Wno-unknown-pragmas -I"$src/tests/emu" -I"$src/include" -I"$src/src" -I"$cuda_inc" \
    "$src/tests/emu/store_tma_emu.cpp" -o "$tmp/store_tma_emu" "$lib" -Wl,-rpath,"$(cd "$(dirname "$lib")" && pwd)" -pthread -lm ||
    { echo "test_store_tma_emu: build failed" >&2; exit 1; }
"$tmp/store_tma_emu"
