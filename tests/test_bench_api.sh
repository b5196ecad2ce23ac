#!/usr/bin/env bash
# test_bench_api.sh - the benchmarks and profiling helpers drive the library
# the way a user does: no bench/ C or CUDA file includes the core's or the
# CUDA backend's internal headers (core/, cuda/; the shared element codecs of
# src/format and the test hooks are allowed), and no bench/ script sets an
# FK_GEMM_* / FK_SMALL_* environment knob (the library reads none: variants
# are forced through the tuning API, docs/tuning.md).
# Usage: tests/test_bench_api.sh [ignored: CTest passes the CLI's path]
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1
fail=0
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

for f in bench/*.c bench/*.h bench/profile/*.c bench/profile/*.cu; do
    [ -f "$f" ] || continue
    hits=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(core|cuda)/' "$f")
    [ -z "$hits" ] || bad "$f includes library internals: $hits"
done
for f in bench/*.sh bench/profile/*.sh bench/profile/*.py; do
    [ -f "$f" ] || continue
    hits=$(grep -nE '(^|[^A-Za-z0-9_-])FK_(GEMM|SMALL)_[A-Z0-9_]*=' "$f")
    [ -z "$hits" ] || bad "$f sets a knob the library does not read: $(echo "$hits" | head -3 | tr '\n' ' ')"
done
echo "test_bench_api: $fail failed"
[ "$fail" = 0 ]
