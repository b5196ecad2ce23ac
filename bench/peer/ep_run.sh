#!/usr/bin/env bash
# ep_run.sh - on a GPU machine: the expert-parallel checks and benchmarks on
# every GPU there (one process per GPU), for both transports and both modes,
# from the folder ep_pack.sh made (carried with the call). NVLink multicast
# stays off. Logs and JSON rows under OUT (the device's $OUT; at most 8 files
# come back: this writes 7).
# Usage (repository root): bash bench/peer/ep_run.sh [PACK [OUT]]   (PACK default devbin/ep)
# Env: FK_EP_STEPS (default "check bench": check = ep_multi_gpu for every
#      transport and mode + examples/moe_ep.py bit-exact sweep and CUDA graph;
#      bench = bench/ep_peer.py and the model-shaped layer benchmark; deepep = build
#      DeepEP from PACK/deepep-src.tar.xz and import it),
#      FK_EP_TOKENS (the benchmarks' tokens per rank, default 1,128,1024,4096).
set -uo pipefail
pack=${1:-devbin/ep}
out=${2:-${OUT:-/tmp/ep-out}}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
root=$PWD
W=$(nvidia-smi -L | wc -l)
log=$out/ep-run.log
say() { echo "=== $* ($(date -u +%T))" | tee -a "$log"; }
say "$W GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
export FP8KIT_LIBRARY=$root/$pack/s/libfp8kit.so PYTHONPATH=$root/python
steps=${FK_EP_STEPS:-check bench}
tokens=${FK_EP_TOKENS:-1,128,1024,4096}
if [[ " $steps " == *" check "* ]]; then
    for m in "" "--high-throughput"; do
        say "ep_multi_gpu, transport nccl (the system's NCCL) $m"
        timeout 150 "$pack/s/ep_multi_gpu" --world "$W" --timeout 140 $m >>"$log" 2>&1
        echo "rc $?" | tee -a "$log"
    done
    say "moe_ep.py bit-exact sweep, transport nccl"
    timeout 150 torchrun --nproc-per-node "$W" examples/moe_ep.py --tokens 1,7,128,1024,8192 --uneven --exact \
        --graph >>"$log" 2>&1
    echo "rc $?" | tee -a "$log"
fi
# NCCL 2.30 (NCCL EP needs it) in every process; NCCL EP's run-time compiler reads its headers
mkdir -p /tmp/ep-nccl /tmp/ep-site
tar xJf "$pack/site.tar.xz" -C /tmp/ep-site
if [ -f "$pack/nccl.tar.xz" ]; then
    tar xJf "$pack/nccl.tar.xz" -C /tmp/ep-nccl
else
    say "building NCCL 2.30 (sm_90) from $pack/nccl-src.tar.xz"
    tar xJf "$pack/nccl-src.tar.xz" -C /tmp/ep-nccl
    cuda=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    view=/tmp/ep-nccl/cuda-view # the toolkit without its own (older) NCCL headers
    mkdir -p "$view/include"
    for e in "$cuda"/*; do [ "$(basename "$e")" = include ] || ln -sf "$e" "$view/"; done
    for e in "$cuda"/include/*; do case "$(basename "$e")" in nccl*) ;; *) ln -sf "$e" "$view/include/" ;; esac; done
    make -C /tmp/ep-nccl/nccl -j"$(nproc)" src.build BUILDDIR=/tmp/ep-nccl CUDA_HOME="$view" \
        NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$out/nccl-build.log" 2>&1 || { tail -20 "$out/nccl-build.log"; exit 1; }
fi
lib=$(ls /tmp/ep-nccl/lib/libnccl.so.2.*.* | head -1)
export PYTHONPATH=/tmp/ep-site:$root/python LD_PRELOAD=$lib NCCL_HOME=/tmp/ep-nccl \
    LD_LIBRARY_PATH=/tmp/ep-site/nccl/ep/lib/cu13:${LD_LIBRARY_PATH:-} NCCL_EP_HOME=/tmp/ep-site/nccl/ep
if [[ " $steps " == *" check "* ]]; then
    for m in "--transport nccl_ep" "--transport nccl_ep --high-throughput"; do
        say "ep_multi_gpu $m"
        timeout 150 "$pack/s/ep_multi_gpu" --world "$W" --timeout 140 $m 2>&1 | grep -v "nccl_ep jit" >>"$log"
        echo "rc ${PIPESTATUS[0]}" | tee -a "$log"
    done
    for tr in nccl nccl_ep; do
        say "moe_ep.py, transport $tr, high-throughput mode, CUDA graph"
        timeout 150 torchrun --nproc-per-node "$W" examples/moe_ep.py --transport $tr --mode high_throughput \
            --graph --tokens 1,7,128,1000 --max-tokens 1024 --uneven 2>&1 | grep -v "nccl_ep jit" >>"$log"
        echo "rc ${PIPESTATUS[0]}" | tee -a "$log"
    done
fi
if [[ " $steps " == *" deepep "* ]]; then
    # DeepEP (V2: NCCL's device API, kernels compiled at run time) against this NCCL 2.30 and the machine's
    # torch and nvidia-nvshmem wheel: a build and an import, the first step towards timing it as a peer
    say "DeepEP build"
    rm -rf /tmp/ep-deepep && mkdir -p /tmp/ep-deepep/ib && tar xJf "$pack/deepep-src.tar.xz" -C /tmp/ep-deepep
    for d in "$pack"/libibverbs-dev_*.deb; do [ -f "$d" ] && dpkg -x "$d" /tmp/ep-deepep/ib; done
    (cd /tmp/ep-deepep/deepep && CPATH=/tmp/ep-deepep/ib/usr/include${CPATH:+:$CPATH} EP_NCCL_ROOT_DIR=/tmp/ep-nccl \
        TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=$(nproc) \
        timeout 400 python3 setup.py build_ext --inplace >"$out/deepep-build.log" 2>&1)
    echo "rc $?" | tee -a "$log"
    tail -5 "$out/deepep-build.log" | tee -a "$log"
    (cd /tmp/ep-deepep/deepep && python3 -c "import deep_ep; print('deep_ep', deep_ep.__file__)") 2>&1 | tail -3 | tee -a "$log"
fi
if [[ " $steps " == *" bench "* ]]; then
    say "bench/ep_peer.py (both transports and modes beside NCCL EP's own fp8 recipe)"
    timeout 200 torchrun --nproc-per-node "$W" bench/ep_peer.py --tokens "$tokens" --jsonl "$out/ep-peer.jsonl" \
        2>&1 | grep -v "nccl_ep jit" >>"$log"
    echo "rc ${PIPESTATUS[0]}" | tee -a "$log"
    for args in "--transport nccl" "--transport nccl_ep" "--transport nccl --mode high_throughput" \
        "--transport nccl_ep --mode high_throughput"; do
        say "moe_ep.py --model-shape --bench $args"
        timeout 150 torchrun --nproc-per-node "$W" examples/moe_ep.py --model-shape --bench --no-check $args \
            --tokens 128,1024,4096 --jsonl "$out/moe-ep.jsonl" 2>&1 | grep -v "nccl_ep jit" >>"$log"
        echo "rc ${PIPESTATUS[0]}" | tee -a "$log"
    done
fi
grep -E "^=== |^rc |passed|FAIL|layer |^OK|^FAILED" "$log" | tail -40
