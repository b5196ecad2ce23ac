#!/usr/bin/env bash
# ep_pack.sh - on this machine (no GPU needed): the folder a GPU-machine call
# carries for the expert-parallel runs with NCCL EP (bench/peer/ep_run.sh):
#   OUT/site.tar.xz   the nccl-extensions wheel (NCCL EP 0.2.0's libnccl_ep.so,
#                     its headers, its Python package nccl.ep) and nccl4py, for
#                     the machines' Python (3.12), CUDA 13 build only (~6 MB)
#   OUT/nccl.tar.xz   NCCL 2.30 built for sm_90 (lib/ and include/, ~30 MB),
#                     from NCCL=DIR (a build folder holding lib/libnccl.so.2.*
#                     and include/), when given; without it ep_run.sh builds
#                     NCCL on the GPU machine from OUT/nccl-src.tar.xz
#                     (NVIDIA/nccl v2.30.7-1 src/ makefiles/ Makefile, ~1 MB;
#                     about 3.5 minutes with 16 cores)
#   OUT/s/            libfp8kit.so and ep_multi_gpu from BUILD (a CUDA build)
# Usage (repository root): bash bench/peer/ep_pack.sh BUILD [OUT]   (OUT default
#   devbin/ep, git-ignored; name it in the call's carry)
# Env: NCCL=DIR (see above), NCCL_GIT (a clone or git dir of NVIDIA/nccl for the
#   source bundle); DEEPEP_GIT and FMT_GIT (clones of deepseek-ai/DeepEP and
#   fmtlib/fmt) add OUT/deepep-src.tar.xz, DeepEP's HEAD with its pinned fmt,
#   and Debian's libibverbs-dev package (rdma-core's headers, which NVSHMEM's
#   include); DeepEP built here in about 2 minutes on 2 cores against the
#   nvidia-nccl-cu13 2.30.7 and nvidia-nvshmem-cu13 3.8.0 wheels.
set -euo pipefail
build=${1:?usage: ep_pack.sh BUILD [OUT]}
out=${2:-devbin/ep}
mkdir -p "$out/s"
cp -L "$build/libfp8kit.so" "$out/s/libfp8kit.so"
cp "$build/ep_multi_gpu" "$out/s/"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    -d "$tmp/whl" nccl-extensions==0.1.0 nccl4py
mkdir -p "$tmp/site"
for w in "$tmp"/whl/*.whl; do python3 -m zipfile -e "$w" "$tmp/site"; done
# what the run does not use: NCCL M2N, the CUDA 12 builds
rm -rf "$tmp/site/nccl/m2n" "$tmp/site/nccl/ep/lib/cu12" "$tmp"/site/nccl/_extensions/bindings/*m2n* \
    "$tmp"/site/nccl/_extensions/bindings/_internal/nccl_m2n*
tar cJf "$out/site.tar.xz" -C "$tmp/site" .
if [ -n "${NCCL:-}" ]; then
    # the shared library alone (the static archive is 100 MB more)
    tar cJf "$out/nccl.tar.xz" -C "$NCCL" $(cd "$NCCL" && ls lib/libnccl.so.2.*.*) include
else
    src=${NCCL_GIT:?set NCCL=DIR (a built NCCL 2.30) or NCCL_GIT (NVIDIA/nccl) for the source bundle}
    git -C "$src" archive --prefix=nccl/ v2.30.7-1 src makefiles Makefile | xz -6 >"$out/nccl-src.tar.xz"
fi
# DeepEP (a peer to build on the GPU machine: ep_run.sh's deepep step), with its fmt submodule
if [ -n "${DEEPEP_GIT:-}" ]; then
    mkdir -p "$tmp/deepep"
    git -C "$DEEPEP_GIT" archive HEAD | tar -x -C "$tmp/deepep"
    fmt_commit=$(git -C "$DEEPEP_GIT" ls-tree HEAD third-party/fmt | awk '{print $3}')
    mkdir -p "$tmp/deepep/third-party/fmt"
    git -C "${FMT_GIT:?FMT_GIT: a clone of fmtlib/fmt holding the fmt commit DeepEP pins}" archive "$fmt_commit" |
        tar -x -C "$tmp/deepep/third-party/fmt"
    echo "DeepEP $(git -C "$DEEPEP_GIT" rev-parse HEAD), fmt $fmt_commit" >"$tmp/deepep/BUNDLE-INFO.txt"
    tar cJf "$out/deepep-src.tar.xz" -C "$tmp" deepep
    # NVSHMEM's headers include rdma-core's (infiniband/mlx5dv.h): the headers package, unpacked there
    (cd "$out" && apt-get download libibverbs-dev >/dev/null)
fi
du -sh "$out" "$out"/*
