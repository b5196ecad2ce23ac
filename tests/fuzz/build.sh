#!/usr/bin/env bash
# build.sh - builds and runs the libFuzzer target of the safetensors reader
# (tests/fuzz/fuzz_st.c) with clang, AddressSanitizer and UBSan.
# Usage: tests/fuzz/build.sh [SECONDS] [WORKDIR]   (default 600 s, /tmp/fp8kit-fuzz)
# The working corpus starts from tests/fuzz/corpus; new finds stay in WORKDIR
# (merge them back with: fuzz_st -merge=1 tests/fuzz/corpus WORKDIR/corpus).
# Crashes are written to WORKDIR/crash-*; the log to WORKDIR/fuzz.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-600}"
work="${2:-/tmp/fp8kit-fuzz}"
mkdir -p "$work/corpus"
clang -std=gnu11 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -Iinclude -Isrc \
    src/io/st_read.c src/io/st_write.c tests/fuzz/fuzz_st.c \
    $(pkg-config --cflags --libs jansson) -o "$work/fuzz_st"
cp -n tests/fuzz/corpus/* "$work/corpus/" 2>/dev/null || true
cd "$work"
exec ./fuzz_st -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -dict="$OLDPWD/tests/fuzz/st.dict" -print_final_stats=1 corpus "$OLDPWD/tests/fuzz/corpus" \
    > fuzz.log 2>&1
