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
#
# tests/fuzz/build.sh check [WORKDIR]   (default /tmp/fp8kit-fuzz-check)
# builds both targets from the same source lists with the plain C compiler
# ($CC, default cc), tests/fuzz/replay.c in place of libFuzzer, and replays
# both corpora through them (the safetensors one only where jansson is
# found): CTest fuzz_build_check, so the fuzz builds cannot stop linking
# unnoticed.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
# What each target is built from, in every mode. The API target gets the
# backend registry that CMake generates from src/core/backends.c.in, here
# with the CPU backend alone (gen_backends DIR writes DIR/backends.c).
api_src=(src/core/*.c src/cpu/*.c tests/fuzz/fuzz_api.c)
st_src=(src/io/st_read.c src/io/st_write.c tests/fuzz/fuzz_st.c)
gen_backends() {
    sed -e 's/@FK_BACKEND_DECLS@/extern const fk_backend_ops fk_cpu_backend;/' \
        -e 's/@FK_BACKEND_LIST@/\&fk_cpu_backend, /' src/core/backends.c.in >"$1/backends.c"
}
if [ "${1:-}" = check ]; then
    work="${2:-/tmp/fp8kit-fuzz-check}"
    mkdir -p "$work"
    gen_backends "$work"
    cc="${CC:-cc}"
    "$cc" -std=gnu11 -O1 -fopenmp -ffp-contract=off -Iinclude -Isrc "${api_src[@]}" "$work/backends.c" \
        tests/fuzz/replay.c -lm -lpthread -o "$work/api_replay"
    "$work/api_replay" tests/fuzz/corpus_api
    if pkg-config --exists jansson 2>/dev/null; then
        # shellcheck disable=SC2046
        "$cc" -std=gnu11 -O1 -Iinclude -Isrc "${st_src[@]}" tests/fuzz/replay.c \
            $(pkg-config --cflags --libs jansson) -o "$work/st_replay"
        "$work/st_replay" tests/fuzz/corpus
    else
        echo "build.sh check: no jansson (pkg-config): the safetensors target is not built"
    fi
    exit 0
fi
if [ "${1:-}" = api ]; then
    secs="${2:-900}"
    work="${3:-/tmp/fp8kit-fuzz-api}"
    mkdir -p "$work/corpus"
    gen_backends "$work"
    san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
    # clang 14 does not link target_clones (ifunc) under these sanitizers: the
    # CPU GEMM epilogue is built as its single default version here.
    # shellcheck disable=SC2086
    clang -std=gnu11 -g -O1 -fno-omit-frame-pointer -fopenmp -ffp-contract=off -fsanitize=fuzzer $san \
        "-Dtarget_clones(...)=unused" -Iinclude -Isrc "${api_src[@]}" "$work/backends.c" -lm -lpthread \
        -o "$work/fuzz_api"
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
    "${st_src[@]}" "${json_objs[@]}" -o "$work/fuzz_st"
cp -n tests/fuzz/corpus/* "$work/corpus/" 2>/dev/null || true
cd "$work"
exec ./fuzz_st -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -dict="$root/tests/fuzz/st.dict" -print_final_stats=1 corpus "$root/tests/fuzz/corpus" \
    > fuzz.log 2>&1
