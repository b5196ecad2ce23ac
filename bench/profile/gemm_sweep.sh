#!/bin/bash
# gemm_sweep.sh - a GEMM experiment in one device call: builds the GEMM tests and
# bench on the device (Release, sm_90a, -j16), runs test_cuda_gemm and
# test_cuda_vs_cublaslt (test_cuda_gemm also with tuning gemm_cluster=2), then
# bench_gemm once per tuning text in $FK_SWEEP (same run, so the rows
# compare), logs under $OUT. Variants are forced through the tuning API
# (docs/tuning.md): bench_gemm --tuning SPEC, and for the tests the
# FP8KIT_TUNING text every context starts with.
# Usage (repo root, on the device): bash bench/profile/gemm_sweep.sh [COMMIT]
# Env: FK_TESTS (entries NAME or NAME@SPEC), FK_SWEEP (tuning texts, e.g.
#      "gemm_cluster=1 gemm_cluster=2,gemm_bn=128"; "auto" is the planner's
#      choice), FK_MEMCHECK (a tuning text for a compute-sanitizer run of
#      test_cuda_gemm --small), FK_NCU (bench_gemm flags), FK_TARGETS,
#      FK_TEST_SECS, FK_BENCH_SECS, FK_BENCH_ARGS.
set -u
commit=${1:-unknown}
. "$(dirname "$0")/../gpu_check.sh" --lib
# fk_run_test ENTRY BUILD_DIR SECONDS: runs test NAME of an entry NAME or
# NAME@SPEC (every context of the test made with tuning SPEC), its log in
# $OUT, and adds its exit status and summary line to $OUT/summary.txt.
fk_run_test() {
    local t=$1 b=$2 secs=$3 spec="" log
    case $t in *@*) spec=${t#*@}; t=${t%%@*} ;; esac
    log="$OUT/$t$(echo "$spec" | tr -c 'A-Za-z0-9\n' '_').log"
    [ -x "$b/$t" ] || { echo "$t: not built" | tee -a "$OUT/summary.txt"; return; }
    FP8KIT_TUNING="$spec" timeout "$secs" "$b/$t" >"$log" 2>&1
    echo "$t $spec exit $? : $(grep -E 'passed, [0-9]+ failed' "$log" | tail -1)" | tee -a "$OUT/summary.txt"
    grep -E "FAIL " "$log" | head -5
}
B=build-dev
fk_build $B ${FK_TARGETS:-test_cuda_gemm test_cuda_vs_cublaslt bench_gemm} || exit 1
for t in ${FK_TESTS-test_cuda_gemm test_cuda_gemm@gemm_cluster=2 test_cuda_vs_cublaslt}; do
    stamp "$t"
    fk_run_test "$t" "$B" ${FK_TEST_SECS:-120}
done
if [ -n "${FK_MEMCHECK:-}" ]; then  # FK_MEMCHECK: a tuning text for the run (e.g. gemm_cluster=2)
    stamp "memcheck test_cuda_gemm --small --tuning $FK_MEMCHECK"
    timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/test_cuda_gemm" --small \
        --tuning "$FK_MEMCHECK" >"$OUT/memcheck.log" 2>&1
    echo "memcheck exit $? : $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)" | tee -a "$OUT/summary.txt"
fi
for o in ${FK_SWEEP-gemm_cluster=1 gemm_cluster=2}; do
    stamp "bench_gemm --tuning $o"
    tag=$(echo "$o" | tr -c 'A-Za-z0-9\n' '_')
    timeout ${FK_BENCH_SECS:-150} "$B/bench_gemm" --tuning "$o" --json "$OUT/gemm-$tag.jsonl" --commit "$commit" --tag "$tag" \
        ${FK_BENCH_ARGS:---shapes 8192x8192x8192,4096x4096x4096,4096x24576x1536} >"$OUT/bench-$tag.log" 2>&1
    echo "bench $o exit $?"
    grep -vE "^#|^$|^fp8kit cuda gemm plan" "$OUT/bench-$tag.log" | tail -25
done
if [ -n "${FK_NCU:-}" ] && command -v ncu >/dev/null; then
    stamp "ncu $FK_NCU"
    timeout 200 ncu --kernel-name regex:fk_gemm_sm90 --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
        "$B/bench_gemm" --reps 5 $FK_NCU >"$OUT/ncu.txt" 2>&1
    grep -E "Duration|SM Frequency|Throughput|Stall|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|L2|Hit" "$OUT/ncu.txt" | head -60
fi
stamp done
