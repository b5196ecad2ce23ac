#!/usr/bin/env bash
# tests/emu/run.sh - builds and runs one host emulation of Hopper GEMM epilogue code
# (tests/emu/NAME.cpp: the kernel headers compiled as host C++, 128 emulated
# threads per warpgroup, results checked against the CPU backend in the shared
# library next to the CLI). Used by tests/test_epilogue_emu.sh and
# tests/test_store_tma_emu.sh. Usage: tests/emu/run.sh NAME [build/fp8kit]
# Exits 77 (skipped) without a C++20 compiler, the CUDA headers or the library.
set -u
name="${1:?usage: tests/emu/run.sh NAME [CLI]}"
cli="${2:-build/fp8kit}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
lib="$(dirname "$cli")/libfp8kit.so"
cxx="${CXX:-c++}"
tag="test_$name"
cuda_inc=""
for d in "${CUDA_HOME:-}/include" "$(dirname "$(command -v nvcc 2>/dev/null || echo /x/x)")/../include" /usr/local/cuda/include; do
    if [ -f "$d/vector_types.h" ] && [ -f "$d/cuda.h" ]; then cuda_inc="$d"; break; fi
done
if [ -z "$cuda_inc" ] || [ ! -f "$lib" ] || ! command -v "$cxx" >/dev/null 2>&1; then
    echo "$tag: needs $cxx, the CUDA headers and $lib; skipped"
    exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! echo '#include <barrier>
int main() { std::barrier<> b(1); b.arrive_and_wait(); }' | "$cxx" -std=c++20 -x c++ - -o "$tmp/probe" -pthread 2>/dev/null; then
    echo "$tag: $cxx has no C++20 <barrier>; skipped"
    exit 77
fi
"$cxx" -std=c++20 -O1 -Wall -Wno-unknown-pragmas -I"$src/tests/emu" -I"$src/include" -I"$src/src" -I"$cuda_inc" \
    "$src/tests/emu/$name.cpp" -o "$tmp/$name" "$lib" -Wl,-rpath,"$(cd "$(dirname "$lib")" && pwd)" -pthread -lm ||
    { echo "$tag: build failed" >&2; exit 1; }
"$tmp/$name"
