#!/usr/bin/env bash
# test_gemm_mx_emu.sh - CTest test (no GPU needed): builds tests/emu/gemm_mx_emu.cpp,
# which compiles the MX arithmetic of the Hopper GEMM (src/cuda/gemm/sm90/mx_math.cuh: scale
# loads, decoding into the stage's scale area, promotion of wgmma fragments) as host
# C++, runs it over whole problems and checks the result against the CPU backend
# (the shared library next to the CLI) and an fp64 reference.
# Run by hand as: tests/test_gemm_mx_emu.sh build/fp8kit
# Exits 77 (skipped) without a C++ compiler or the library.
set -u
cli="${1:-build/fp8kit}"
src="$(cd "$(dirname "$0")/.." && pwd)"
lib="$(dirname "$cli")/libfp8kit.so"
cxx="${CXX:-c++}"
if [ ! -f "$lib" ] || ! command -v "$cxx" >/dev/null 2>&1; then
    echo "test_gemm_mx_emu: needs $cxx and $lib; skipped"
    exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$cxx" -std=c++17 -O2 -ffp-contract=off -Wall -Wno-unknown-pragmas -I"$src/include" -I"$src/src" \
    "$src/tests/emu/gemm_mx_emu.cpp" -o "$tmp/gemm_mx_emu" "$lib" -Wl,-rpath,"$(cd "$(dirname "$lib")" && pwd)" -lm ||
    { echo "test_gemm_mx_emu: build failed" >&2; exit 1; }
"$tmp/gemm_mx_emu"
