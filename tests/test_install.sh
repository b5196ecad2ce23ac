#!/usr/bin/env bash
# test_install.sh - `cmake --install` into a temporary prefix, move the installed
# tree elsewhere (the files must not hold the prefix they were installed to),
# then build examples/quickstart.c against it four ways and run each:
# pkg-config fp8kit (shared), pkg-config fp8kit-static (archive), and
# find_package(fp8kit CONFIG) with fp8kit::fp8kit and fp8kit::fp8kit_static.
# Also checks that libfp8kit.so exports only fp8kit_* symbols.
# Usage: tests/test_install.sh BUILD_DIR SOURCE_DIR   (CTest passes both)
set -euo pipefail
build=$1 src=$2
cc=${CC:-cc}
command -v pkg-config >/dev/null || { echo "pkg-config missing: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$tmp/first" >/dev/null || fail "cmake --install"
mv "$tmp/first" "$tmp/moved"
p=$tmp/moved
libdir=$(dirname "$(find "$p" -name 'libfp8kit.a' | head -1)")
[ -d "$libdir" ] || fail "no libfp8kit.a installed"
if grep -rlF "$tmp/first" "$libdir/pkgconfig" "$libdir/cmake" >/dev/null; then
    fail "installed pkg-config / CMake files name the install prefix: $(grep -rlF "$tmp/first" "$libdir/pkgconfig" "$libdir/cmake")"
fi

# Exported symbols: the public API only.
extra=$(nm -D --defined-only "$libdir/libfp8kit.so" | awk '{print $3}' | grep -v '^fp8kit_' || true)
[ -z "$extra" ] || fail "libfp8kit.so exports internal symbols: $(echo $extra | head -c 300)"
echo "ok: libfp8kit.so exports $(nm -D --defined-only "$libdir/libfp8kit.so" | grep -c ' fp8kit_') fp8kit_* symbols and nothing else"

run() { # name, command...
    local name=$1; shift
    local out
    out=$("$@" 2>&1) || fail "$name: exit $? ($out)"
    echo "ok: $name: $out"
}

export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --modversion fp8kit)" = "$(grep -E '^#define FP8KIT_VERSION_(MAJOR|MINOR|PATCH)' "$p/include/fp8kit.h" | awk '{print $3}' | paste -sd.)" ] ||
    fail "pkg-config --modversion disagrees with fp8kit.h"
# shellcheck disable=SC2046
$cc -o "$tmp/qs_pc_shared" "$src/examples/quickstart.c" $(pkg-config --cflags --libs fp8kit) -lm ||
    fail "build against pkg-config fp8kit"
run "pkg-config fp8kit (shared)" env LD_LIBRARY_PATH="$libdir" "$tmp/qs_pc_shared"
# shellcheck disable=SC2046
$cc -o "$tmp/qs_pc_static" "$src/examples/quickstart.c" $(pkg-config --cflags --libs fp8kit-static) ||
    fail "build against pkg-config fp8kit-static"
if ldd "$tmp/qs_pc_static" | grep libfp8kit; then fail "fp8kit-static linked the shared library"; fi
run "pkg-config fp8kit-static" "$tmp/qs_pc_static"

cmake -S "$src/tests/install" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$p" -DCMAKE_BUILD_TYPE=Release \
    -DQUICKSTART="$src/examples/quickstart.c" >"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "find_package(fp8kit CONFIG)"; }
cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "build of the CMake consumer"; }
if ldd "$tmp/consumer/quickstart_static" | grep libfp8kit; then fail "fp8kit::fp8kit_static linked the shared library"; fi
ldd "$tmp/consumer/quickstart_shared" >"$tmp/ldd.txt"
grep -q 'libfp8kit\.so.* => /' "$tmp/ldd.txt" || fail "fp8kit::fp8kit did not link the shared library"
run "find_package: fp8kit::fp8kit" "$tmp/consumer/quickstart_shared"
run "find_package: fp8kit::fp8kit_static" "$tmp/consumer/quickstart_static"
echo "test_install: all passed"
