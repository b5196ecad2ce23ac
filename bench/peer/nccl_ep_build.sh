#!/usr/bin/env bash
# nccl_ep_build.sh - build NCCL (2.30, the Device API NCCL EP needs) and NCCL EP from
# NVIDIA/nccl's public source, for Hopper only, on a machine with nvcc and no GPU, so
# that the two libraries can be carried to the GPU machines (whose NCCL 2.28 is too old
# for libnccl_ep.so: undefined symbol ncclCommQueryProperties) and preloaded there.
#
# Usage (repository root): bash bench/peer/nccl_ep_build.sh SRC [OUT]
#   SRC  a checkout of https://github.com/NVIDIA/nccl (a git work tree, or a git dir
#        whose HEAD is exported first)
#   OUT  where the build goes (default .nccl, git-ignored); OUT/lib holds libnccl.so* and
#        libnccl_ep.so*, OUT/include the headers. Carry OUT/lib (and OUT/include for NCCL
#        EP's run-time JIT) to the device, never all of OUT: the sources and objects stay.
# Environment: JOBS (default: the CPU count), NVCC_GENCODE (default sm_90 only, which
#   keeps the libraries small: the GPU machines are H100 / H200).
# Prints the libraries' sizes at the end (a device call carries at most 64 MiB).
set -euo pipefail
src=${1:?usage: nccl_ep_build.sh SRC [OUT]}
out=${2:-.nccl}
mkdir -p "$out"
out=$(cd "$out" && pwd)
jobs=${JOBS:-$(nproc)}
gencode=${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}
t0=$(date +%s)
say() { echo "[nccl_ep_build +$(($(date +%s) - t0))s] $*"; }

# (to resume an interrupted build, pass OUT/src: a work tree is built in place)
if [ ! -f "$src/Makefile" ]; then # a bare git dir: export its HEAD
    tree=$out/src
    rm -rf "$tree" && mkdir -p "$tree"
    git --git-dir="$src" archive HEAD | tar -x -C "$tree"
    src=$tree
fi
# The CUDA toolkit here ships NCCL 2.28 headers (include/nccl.h, nccl_device/): with them on
# the include path the tree's own nccl_device headers are skipped by their include guards
# (error: NCCL_GIN_MAX_CONNECTIONS was not declared). Build against a view of the toolkit
# without them.
cuda=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")}
if ls "$cuda/include" | grep -q '^nccl'; then
    view=$out/cuda-view
    rm -rf "$view" && mkdir -p "$view/include"
    for e in "$cuda"/*; do [ "$(basename "$e")" = include ] || ln -s "$e" "$view/"; done
    for e in "$cuda"/include/*; do case "$(basename "$e")" in nccl*) ;; *) ln -s "$e" "$view/include/" ;; esac; done
    cuda=$view
fi
export CUDA_HOME=$cuda
say "NCCL $(grep -E '^NCCL_(MAJOR|MINOR|PATCH)' "$src/makefiles/version.mk" | awk '{print $3}' | paste -sd.) from $src"
say "make src.build (gencode $gencode, $jobs jobs)"
make -C "$src" -j"$jobs" src.build BUILDDIR="$out" CUDA_HOME="$CUDA_HOME" NVCC_GENCODE="$gencode" >"$out/nccl-build.log" 2>&1 ||
    { tail -30 "$out/nccl-build.log"; exit 1; }
say "make -C contrib/nccl_ep lib"
make -C "$src/contrib/nccl_ep" -j"$jobs" lib BUILDDIR="$out" NCCL_HOME="$out" CUDA_HOME="$CUDA_HOME" NVCC_GENCODE="$gencode" \
    >"$out/nccl-ep-build.log" 2>&1 || { tail -30 "$out/nccl-ep-build.log"; exit 1; }
# the symbol tables are most of the size: strip the carried copies (the static archive stays out)
for f in "$out"/lib/libnccl.so.*.*.* "$out"/lib/libnccl_ep.so*; do
    [ -f "$f" ] && [ ! -L "$f" ] && strip --strip-unneeded "$f"
done
say "done"
ls -la "$out/lib" | grep -E "libnccl(_ep)?\.so" || true
du -shL "$out"/lib/libnccl.so "$out"/lib/libnccl_ep.so 2>/dev/null || du -sh "$out/lib"
