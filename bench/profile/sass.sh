#!/usr/bin/env bash
# sass.sh - SASS facts of the CUDA kernels of a built tree, read with cuobjdump
# (no GPU needed): for the GEMM object (src/cuda/gemm/sm90/kernels_dense.cu.o) the counts of QGMMA
# (wgmma), LDL / STL (local memory, i.e. spills) and UTMALDG (TMA loads), and for
# a few quantization kernels their instruction mix (top 25 opcodes). Output to
# stdout and the full GEMM SASS to $OUT/sass-gemm.txt.gz.
# Usage (repo root): bash bench/profile/sass.sh [BUILD_DIR]   (default build-gpu)
# Env: FK_SASS_KERNELS - mangled kernel names for the instruction mix (the
#      defaults below are the axis -1 segment and axis -2 transpose kernels and
#      may need updating when their templates change).
set -u
B=${1:-build-gpu}
OUT=${OUT:-$PWD/profile-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
command -v cuobjdump >/dev/null || PATH=$(bash "$(dirname "$0")/sass_tools.sh"):$PATH
command -v cuobjdump >/dev/null || { echo "cuobjdump not on PATH"; exit 1; }
obj=$(find "$B" -path '*src/cuda/gemm/sm90/kernels_dense.cu.o' | head -1)
if [ -n "$obj" ]; then
    cuobjdump --dump-sass "$obj" >"$OUT/sass-gemm.txt" 2>&1
    echo "GEMM ($obj): QGMMA $(grep -c QGMMA "$OUT/sass-gemm.txt"), LDL $(grep -c 'LDL' "$OUT/sass-gemm.txt")," \
        "STL $(grep -c 'STL' "$OUT/sass-gemm.txt"), UTMALDG $(grep -c UTMALDG "$OUT/sass-gemm.txt")"
    gzip -f "$OUT/sass-gemm.txt"
else
    echo "no src/cuda/gemm/sm90/kernels_dense.cu.o under $B"
fi
bin=$B/bench_quant
[ -x "$bin" ] || { echo "no $bin: instruction mix skipped"; exit 0; }
for k in ${FK_SASS_KERNELS:-_Z13fk_seg_kernelILi2ELi0ELi0EEv11fk_seg_args _Z13fk_mxt_kernelILi2ELi0ELb1EEv11fk_mxt_args}; do
    echo "== $k: instruction mix"
    timeout 60 cuobjdump -sass -fun "$k" "$bin" 2>&1 | grep -oE '^\s+/\*[0-9a-f]+\*/\s+[A-Z][A-Z0-9_.]*' |
        awk '{print $2}' | sed 's/\..*//' | sort | uniq -c | sort -rn | head -25
done
