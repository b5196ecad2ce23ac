#!/bin/bash
# s25 call 5: the expert-parallel layer (include/fp8kit_ep.h) on one GPU (world size 1: NCCL
# sends to itself) against its CPU reference, under memcheck and racecheck; the gated tests
# after the shared tensor-map helper.
cd "$(dirname "$0")/.."
O=${OUT:-/tmp/out}; mkdir -p $O/t
S=$O/0-summary.txt
t0=$(date +%s)
run() { local n=$1 to=$2; shift 2
  timeout $to "$@" > $O/t/$n.log 2>&1; local rc=$?
  echo "$n rc=$rc at $(( $(date +%s) - t0 )) s: $(grep -E 'passed|failed|ERROR SUMMARY|RACECHECK SUMMARY|skipped' $O/t/$n.log | tail -2 | tr '\n' ' ')" >> $S
  grep -m8 -E 'FAIL|Illegal|hazard detected|Invalid|mismatch|error' $O/t/$n.log >> $S; }
B=devbin/s
export LD_LIBRARY_PATH=$PWD/$B
export NCCL_NVLS_ENABLE=0
(ldconfig -p | grep -i nccl; ls /usr/lib/x86_64-linux-gnu | grep -i nccl; python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))" 2>&1) >> $S
if ! ldconfig -p | grep -q libnccl.so.2; then
  P=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
  [ -n "$P" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$P && echo "nccl from $P" >> $S
fi
run ep1 300 $B/ep_multi_gpu --world 1
head -40 $O/t/ep1.log >> $S
run ep1-mem 400 compute-sanitizer --tool memcheck $B/ep_multi_gpu --world 1
run ep1-race 400 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 20 $B/ep_multi_gpu --world 1
run sw 240 $B/test_cuda_gemm_swiglu
run gsw 240 $B/test_cuda_grouped_swiglu
tar czf $O/logs.tgz -C $O t && rm -rf $O/t
echo total $(( $(date +%s) - t0 )) s >> $S
cat $S
