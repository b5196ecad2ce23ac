#!/bin/bash
# ncu_source.sh - where the GEMM kernel stalls: builds bench_gemm on the device,
# profiles one fk_gemm_sm90 launch per (shape, mode) with ncu source counters and
# prints the SASS instructions with the most warp-stall samples. Logs under $OUT.
# Usage (repo root, on the device): OUT=dir bash bench/ncu_source.sh
set -u
export PATH=/usr/local/cuda/bin:$PATH
cublas_dir=$(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${cublas_dir:-/nonexistent}:${LD_LIBRARY_PATH:-}
B=build-dev
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA=ON "-DFP8KIT_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" >$OUT/build.log 2>&1 && cmake --build $B -j16 --target bench_gemm >>$OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
for sh in "4096x24576x1536 tensor_fast" "8192x8192x8192 tensor"; do
  set -- $sh
  tag=$1-$2
  timeout 150 ncu --kernel-name regex:fk_gemm_sm90 --launch-skip 3 --launch-count 1 --section SourceCounters --section WarpStateStats -o $OUT/rep-$tag $B/bench_gemm --reps 5 --shapes $1 --modes $2 > $OUT/ncu-$tag.txt 2>&1
  ncu -i $OUT/rep-$tag.ncu-rep --page source --csv --print-source sass > $OUT/src-$tag.csv 2>/dev/null
  python3 - $OUT/src-$tag.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
h = rows[0]
def col(name):
    for i, c in enumerate(h):
        if c.strip().startswith(name): return i
    return None
ci = col("Warp Stall Sampling (All"); si = col("Source"); ai = col("Address")
print("columns:", [c for c in h][:12])
data = []
for r in rows[1:]:
    try: data.append((float(r[ci].replace(",", "")), r[ai] if ai is not None else "", r[si]))
    except Exception: pass
tot = sum(d[0] for d in data) or 1
data.sort(reverse=True)
print("total samples", tot)
for d in data[:25]:
    print("%5.1f%%  %s  %s" % (100 * d[0] / tot, d[1], d[2][:110]))
PY
done
