#!/usr/bin/env bash
# trace_small.sh - builds bench/profile/trace_small.cu against a copy of the library
# whose small-M kernel records phase stamps (-DFK_SMALL_TRACE), then runs it
# for each M N K triple given. On the device, repo root.
# Usage: bash bench/profile/trace_small.sh 64 7168 7168 [128 2112 7168 ...]
set -eu
B=${FK_TRACE_BUILD:-/tmp/build-trace}
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA=ON -DCMAKE_CUDA_FLAGS=-DFK_SMALL_TRACE \
    "-DFP8KIT_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" >/dev/null
cmake --build $B -j16 --target fp8kit_static >/dev/null
nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Iinclude -o $B/trace_small bench/profile/trace_small.cu \
    $B/libfp8kit.a -lcublasLt -lcuda -lgomp -lm $(pkg-config --libs jansson 2>/dev/null)
while [ $# -ge 3 ]; do
    $B/trace_small "$1" "$2" "$3"
    shift 3
done
