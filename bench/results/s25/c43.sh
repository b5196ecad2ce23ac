#!/bin/bash
# s25 call 7: Python fp8kit.distributed on one GPU (world size 1): the tests, the example under
# python3 and torchrun with 1 process, exact mode; the layer bench at world size 1.
cd "$(dirname "$0")/.."
O=${OUT:-/tmp/out}; mkdir -p $O/t
S=$O/0-summary.txt
t0=$(date +%s)
export FP8KIT_LIBRARY=$PWD/devbin/s/libfp8kit.so PYTHONPATH=$PWD/python NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.is_available())" >> $S 2>&1
r() { local n=$1; shift; timeout 300 "$@" > $O/t/$n.log 2>&1; echo "$n rc=$? at $(( $(date +%s) - t0 )) s" >> $S; tail -15 $O/t/$n.log >> $S; }
r pytest python3 -m pytest python/tests/test_distributed.py -q -rs
r ex1 python3 examples/moe_ep.py --tokens 1,7,128
r ex1-exact torchrun --nproc-per-node 1 examples/moe_ep.py --scale-layout plain --exact
r ex1-bench torchrun --nproc-per-node 1 examples/moe_ep.py --issue-shape --bench --tokens 128,1024,4096 --intermediates off --jsonl $O/moe_ep.jsonl
tar czf $O/logs.tgz -C $O t && rm -rf $O/t
echo total $(( $(date +%s) - t0 )) s >> $S
cat $S
