#!/bin/bash
# s25 call 8: Nsight Compute of the paired gated tile beside the dense block kernel and the 64-row
# gated tile at 4096x4096x7168 (block scales, plain A), same sections as s24's.
cd "$(dirname "$0")/.."
O=${OUT:-/tmp/out}; mkdir -p $O/t
t0=$(date +%s)
B=devbin/s
export LD_LIBRARY_PATH=$PWD/$B
prof() { local tag=$1 kn=$2 tun=$3
  timeout 150 ncu --kernel-name "$kn" --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis -o $O/t/$tag -f $B/bench_swiglu --reps 1 --shapes 4096x4096x7168 --modes block --tuning $tun \
    > $O/t/$tag.log 2>&1
  echo "$tag rc=$? at $(( $(date +%s) - t0 )) s"
  ncu -i $O/t/$tag.ncu-rep --page raw --csv > $O/t/$tag.csv 2>/dev/null
  python3 bench/profile/ncu_summary.py $O/t/$tag.csv >> $O/1-ncu-summary.txt 2>&1
  rm -f $O/t/$tag.ncu-rep; gzip $O/t/$tag.csv; }
prof glu-pair fk_gemm_sm90_glu_kernel gemm_bm=128
prof glu-64 fk_gemm_sm90_glu_kernel gemm_bm=64
prof dense-block regex:^fk_gemm_sm90_kernel gemm_bm=128
tar czf $O/logs.tgz -C $O t && rm -rf $O/t
cat $O/1-ncu-summary.txt
