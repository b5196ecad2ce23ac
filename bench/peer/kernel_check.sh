#!/usr/bin/env bash
# kernel_check.sh - on the GPU machine, from binaries built here and carried (nothing is compiled there but
# DeepGEMM): the GEMM kernel test suites, compute-sanitizer racecheck of their --small runs, then the
# block-scaled and K-grouped cases beside DeepGEMM (bench/peer/ab_libs.sh, one process per SPEC line).
# BIN holds libfp8kit.so and the test_cuda_* binaries of one build (about 40 MB: carry it, and .peer for
# DeepGEMM's sources). The summary comes first in OUT/0-summary.txt (the device returns 8 files).
# Usage (repository root, on the GPU machine): OUT=dir bash bench/peer/kernel_check.sh BIN [SPEC]
#   SPEC: ab_libs.sh's lines (TAG LIB TUNING ...); without it only the tests run.
# Env: FK_CHECK_FULL (default "test_cuda_gemm test_cuda_grouped_staged test_cuda_k_grouped"): the suites
#   run in full (each at most 300 s); every suite in BIN runs --small under racecheck.
set -u
bin=${1:?usage: kernel_check.sh BIN [SPEC]}
spec=${2:-}
O=${OUT:-/tmp/kernel-check}
mkdir -p "$O/logs"
S=$O/0-summary.txt
t0=$(date +%s)
el() { echo "$(($(date +%s) - t0)) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$S"
for t in "$bin"/test_cuda_*; do
    n=$(basename "$t")
    timeout 240 compute-sanitizer --tool racecheck "$t" --small >"$O/logs/race-$n.log" 2>&1
    echo "racecheck $n --small rc=$? $(el): $(grep -h 'passed,\|RACECHECK SUMMARY' "$O/logs/race-$n.log" | tr '\n' ' ')" >>"$S"
    grep -h "^FAIL\|Race reported" "$O/logs/race-$n.log" | head -3 >>"$S"
done
for n in ${FK_CHECK_FULL:-test_cuda_gemm test_cuda_grouped_staged test_cuda_k_grouped}; do
    [ -x "$bin/$n" ] || continue
    timeout 300 "$bin/$n" >"$O/logs/$n.log" 2>&1
    echo "$n rc=$? $(el): $(tail -1 "$O/logs/$n.log")" >>"$S"
    grep -h "^FAIL" "$O/logs/$n.log" | head -3 >>"$S"
done
if [ -n "$spec" ]; then
    OUT=$O/ab ONLY=${ONLY:-gemm_block|k_grouped} PEER_ARGS=${PEER_ARGS:---ours-sfa mn_major} \
        bash bench/peer/ab_libs.sh "$spec" >>"$S" 2>&1
fi
echo "done $(el)" >>"$S"
tar czf "$O/logs.tar.gz" -C "$O" logs && rm -rf "$O/logs"
cat "$S"
