#!/usr/bin/env bash
# test_ep_kernels_emu.sh - CTest test (no GPU needed): builds tests/emu/ep_kernels_emu.cpp,
# which compiles the expert-parallel layer's kernels (src/ep/nccl/ep_kernels.cuh) as host
# C++ on emulated threads, with the layer's geometry (src/ep/ep_geom.c) and CPU reference
# (src/ep/ep_ref.c), and checks dispatch and combine on 1 to 3 emulated ranks against the
# reference bit for bit (the shared library next to the CLI quantizes).
# Run by hand as: tests/test_ep_kernels_emu.sh build/fp8kit
# Exits 77 (skipped) without a C and a C++20 compiler or the library.
set -u
cli="${1:-build/fp8kit}"
src="$(cd "$(dirname "$0")/.." && pwd)"
lib="$(dirname "$cli")/libfp8kit.so"
cxx="${CXX:-c++}"
cc="${CC:-cc}"
if [ ! -f "$lib" ] || ! command -v "$cxx" >/dev/null 2>&1 || ! command -v "$cc" >/dev/null 2>&1; then
    echo "test_ep_kernels_emu: needs $cc, $cxx and $lib; skipped"
    exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! echo '#include <barrier>
int main() { std::barrier<> b(1); b.arrive_and_wait(); }' | "$cxx" -std=c++20 -x c++ - -o "$tmp/probe" -pthread 2>/dev/null; then
    echo "test_ep_kernels_emu: $cxx has no C++20 <barrier>; skipped"
    exit 77
fi
for f in ep_geom ep_ref; do
    "$cc" -std=gnu11 -O1 -ffp-contract=off -Wall -Wextra -I"$src/include" -I"$src/src" -c "$src/src/ep/$f.c" \
        -o "$tmp/$f.o" || { echo "test_ep_kernels_emu: build of $f.c failed" >&2; exit 1; }
done
"$cxx" -std=c++20 -O1 -ffp-contract=off -Wall -Wno-unknown-pragmas -I"$src/tests" -I"$src/include" -I"$src/src" \
    "$src/tests/emu/ep_kernels_emu.cpp" "$tmp/ep_geom.o" "$tmp/ep_ref.o" -o "$tmp/ep_kernels_emu" "$lib" \
    -Wl,-rpath,"$(cd "$(dirname "$lib")" && pwd)" -pthread -lm ||
    { echo "test_ep_kernels_emu: build failed" >&2; exit 1; }
"$tmp/ep_kernels_emu"
