#!/usr/bin/env bash
# build.sh - builds and runs the libFuzzer target of the safetensors reader
# (tests/fuzz/fuzz_st.c) with clang, AddressSanitizer and UBSan, one job.
# Usage: tests/fuzz/build.sh [SECONDS] [WORKDIR]   (default 600 s, /tmp/fp8kit-fuzz)
# Environment: JANSSON_SRC=DIR  the src/ folder of a jansson source tree (e.g.
#   upstream tag v2.14, the version Debian 12 ships): it is compiled with the
#   same instrumentation so the fuzzer also sees coverage inside the JSON
#   parser. Without it the system libjansson is linked (not instrumented).
# The working corpus starts from tests/fuzz/corpus; new finds stay in
# WORKDIR/corpus (merge the interesting ones back with
#   WORKDIR/fuzz_st -merge=1 tests/fuzz/corpus WORKDIR/corpus).
# Crashes go to WORKDIR/crash-*; the log to WORKDIR/fuzz.log.
#
# tests/fuzz/build.sh api [SECONDS] [WORKDIR]   (default 900 s, /tmp/fp8kit-fuzz-api)
# builds and runs tests/fuzz/fuzz_api.c instead: the public C API (src/core,
# src/cpu, all instrumented, OpenMP on) on a CPU context, corpus
# tests/fuzz/corpus_api, new finds in WORKDIR/corpus, log WORKDIR/fuzz.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
if [ "${1:-}" = api ]; then
    secs="${2:-900}"
    work="${3:-/tmp/fp8kit-fuzz-api}"
    mkdir -p "$work/corpus"
    san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
    # clang 14 does not link target_clones (ifunc) under these sanitizers: the
    # CPU GEMM epilogue is built as its single default version here.
    # shellcheck disable=SC2086
    clang -std=gnu11 -g -O1 -fno-omit-frame-pointer -fopenmp -ffp-contract=off -fsanitize=fuzzer $san \
        "-Dtarget_clones(...)=unused" -Iinclude -Isrc src/core/*.c src/cpu/*.c tests/fuzz/fuzz_api.c -lm -lpthread -o "$work/fuzz_api"
    [ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0
    cd "$work"
    exec ./fuzz_api -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=512 \
        -print_final_stats=1 corpus "$root/tests/fuzz/corpus_api" > fuzz.log 2>&1
fi
secs="${1:-600}"
work="${2:-/tmp/fp8kit-fuzz}"
mkdir -p "$work/corpus"
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
json_objs=()
json_flags=$(pkg-config --cflags --libs jansson)
if [ -n "${JANSSON_SRC:-}" ]; then
    mkdir -p "$work/jansson"
    # jansson_config.h as Debian configured it; a minimal private config
    cp "$(pkg-config --variable=includedir jansson)/jansson_config.h" "$work/jansson/"
    printf '%s\n' '#define HAVE_STDINT_H 1' '#define HAVE_UNISTD_H 1' '#define HAVE_SYS_TIME_H 1' \
        '#define HAVE_SYS_TYPES_H 1' '#define HAVE_FCNTL_H 1' '#define HAVE_SYS_STAT_H 1' \
        '#define HAVE_GETPID 1' '#define HAVE_GETTIMEOFDAY 1' '#define HAVE_LOCALECONV 1' \
        '#define HAVE_SNPRINTF 1' '#define HAVE_SYNC_BUILTINS 1' '#define HAVE_ATOMIC_BUILTINS 1' \
        '#define USE_URANDOM 1' '#define INITIAL_HASHTABLE_ORDER 3' > "$work/jansson/jansson_private_config.h"
    for f in "$JANSSON_SRC"/*.c; do
        o="$work/jansson/$(basename "${f%.c}").o"
        # shellcheck disable=SC2086
        clang -c -g -O1 -fsanitize=fuzzer-no-link $san -DHAVE_CONFIG_H=1 -I"$work/jansson" -I"$JANSSON_SRC" \
            "$f" -o "$o"
        json_objs+=("$o")
    done
    json_flags="-I$work/jansson -I$JANSSON_SRC"
fi
# shellcheck disable=SC2086
clang -std=gnu11 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer $san -Iinclude -Isrc $json_flags \
    src/io/st_read.c src/io/st_write.c tests/fuzz/fuzz_st.c "${json_objs[@]}" -o "$work/fuzz_st"
cp -n tests/fuzz/corpus/* "$work/corpus/" 2>/dev/null || true
cd "$work"
exec ./fuzz_st -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -dict="$root/tests/fuzz/st.dict" -print_final_stats=1 corpus "$root/tests/fuzz/corpus" \
    > fuzz.log 2>&1
