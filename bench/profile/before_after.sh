#!/usr/bin/env bash
# before_after.sh - same-run performance guard of a change that must not
# change speed: builds the tree "before" (a source folder, e.g. from
# `git archive <commit>`) and this tree ("after"), runs the same benches on
# both in turn (bench_gemm with the M <= 128 section, bench_grouped,
# bench_quant), and lists every row where "after" is slower by more than 2%
# (compare_rows.py). The GEMM shapes of rows flagged slow are timed FK_ROUNDS
# (default 4) more times on each side, in balanced order, and each row's
# median over its runs is compared.
#
# usage (repository root, GPU machine): bash bench/profile/before_after.sh BEFORE_SRC [OUT]
# FK_STEPS: "build bench" (default) or a subset; builds in build-before / build-after.
# FK_AFTER_SRC: the new tree's source folder (default: this one).
# FK_AFTER_ALL=1: build-after gets every target (tests, CLI) too, for a test run
# on the same build.
set -u
BEFORE=${1:?usage: before_after.sh BEFORE_SRC [OUT]}
OUT=${2:-${OUT:-$PWD/before-after-out}}
# shellcheck source=../gpu_check.sh
. bench/gpu_check.sh --lib
steps=${FK_STEPS:-build bench}
targets="bench_gemm bench_grouped bench_quant"
gen="-DFP8KIT_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a"
j=$(( $(nproc) / 2 ))

if [[ " $steps " == *" build "* ]]; then
    stamp "build before ($BEFORE) and after, in parallel"
    ( cmake -S "$BEFORE" -B build-before -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA=ON -DFP8KIT_TESTS=OFF "$gen" \
          >"$OUT/build-before.log" 2>&1 && cmake --build build-before -j "$j" --target $targets >>"$OUT/build-before.log" 2>&1 ) &
    pb=$!
    if [ "${FK_AFTER_ALL:-0}" = 1 ]; then
        st=ON
        [ -n "$FK_JANSSON_CMAKE" ] || [ -e /usr/include/jansson.h ] || pkg-config --exists jansson 2>/dev/null || st=OFF
        # shellcheck disable=SC2086
        ( cmake -S "${FK_AFTER_SRC:-.}" -B build-after -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA=ON -DFP8KIT_SAFETENSORS=$st \
              $FK_JANSSON_CMAKE "$gen" >"$OUT/build-after.log" 2>&1 &&
              cmake --build build-after -j "$j" >>"$OUT/build-after.log" 2>&1 ) &
    else
        ( cmake -S "${FK_AFTER_SRC:-.}" -B build-after -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA=ON -DFP8KIT_TESTS=OFF "$gen" \
              >"$OUT/build-after.log" 2>&1 && cmake --build build-after -j "$j" --target $targets >>"$OUT/build-after.log" 2>&1 ) &
    fi
    pa=$!
    wait $pb || { stamp "before: build failed"; tail -30 "$OUT/build-before.log"; exit 1; }
    wait $pa || { stamp "after: build failed"; tail -30 "$OUT/build-after.log"; exit 1; }
    stamp "built"
fi

# run SIDE TAG [bench_gemm shape filter]: one pass of the benches of one tree
run() {
    local side=$1 tag=$2 shapes=${3:-}
    local b=build-$side o="$OUT/$side-$tag"
    mkdir -p "$o"
    stamp "$side $tag: bench_gemm${shapes:+ --shapes $shapes}"
    "$b/bench_gemm" --small --json "$o/gemm.jsonl" ${shapes:+--shapes "$shapes"} >"$o/bench_gemm.log" 2>&1
    if [ -z "$shapes" ]; then
        stamp "$side $tag: bench_grouped, bench_quant"
        "$b/bench_grouped" --json "$o/grouped.jsonl" >"$o/bench_grouped.log" 2>&1
        "$b/bench_quant" "$o/quant.jsonl" >"$o/bench_quant.log" 2>&1
    fi
    cat "$o"/*.jsonl >"$o/all.jsonl" 2>/dev/null
}

if [[ " $steps " == *" bench "* ]]; then
    # round 1: everything, before then after; then the GEMM shapes of the rows
    # flagged slow, FK_ROUNDS more times each side in balanced order (after,
    # before, before, after, ...) so drift in clocks and temperature falls on
    # both; each row's value is the median of its runs
    run before 1
    run after 1
    python3 bench/profile/compare_rows.py "$OUT/before-1/all.jsonl" "$OUT/after-1/all.jsonl" \
        --slow-shapes "$OUT/slow-1.txt" >"$OUT/compare-1.txt"
    tail -1 "$OUT/compare-1.txt"
    shapes=$(awk '$1 ~ /^gemm/ {print $2}' "$OUT/slow-1.txt" | sort -u | paste -sd, -)
    bs="$OUT/before-1/all.jsonl" as="$OUT/after-1/all.jsonl"
    if [ -n "$shapes" ]; then
        for t in $(seq 2 $((${FK_ROUNDS:-4} + 1))); do
            if [ $((t % 2)) = 0 ]; then run after "$t" "$shapes"; run before "$t" "$shapes";
            else run before "$t" "$shapes"; run after "$t" "$shapes"; fi
            bs="$bs,$OUT/before-$t/all.jsonl" as="$as,$OUT/after-$t/all.jsonl"
        done
    fi
    python3 bench/profile/compare_rows.py "$bs" "$as" >"$OUT/compare.txt"
    rc=$?
    grep -E 'SLOWER' "$OUT/compare.txt" | head -40
    tail -1 "$OUT/compare.txt"
    stamp "done"
    exit $rc
fi
