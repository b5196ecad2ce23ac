#!/usr/bin/env bash
# test_install.sh - the installed C package, as the README shows it:
#  1. runs the README's install block (the sh block after the line
#     "<!-- tests/test_install.sh runs the next block -->") as written, with HOME
#     set to a scratch folder, from a folder where build/, examples/ and tests/
#     are this build and this source tree: install, pkg-config shared (-lm, rpath,
#     no LD_LIBRARY_PATH) and static, find_package shared and static, each run;
#     the README's cmake block must be tests/install/CMakeLists.txt's lines;
#  2. installs again, moves the installed tree (no file may hold the prefix it
#     was installed to) and builds the CMake consumer against the moved tree;
#  3. with a dependency of the archive hidden from the consumer (a CUDA build: the
#     CUDA toolkit; else OpenMP), find_package(fp8kit) still gives fp8kit::fp8kit
#     and the program built on it runs, and COMPONENTS static fails naming it;
#  4. libfp8kit.so exports only fp8kit_* symbols.
# Usage: tests/test_install.sh BUILD_DIR SOURCE_DIR   (CTest passes both)
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
command -v pkg-config >/dev/null || { echo "pkg-config missing: skipped"; exit 77; }
command -v cc >/dev/null || { echo "no cc: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# ---- 1. the README's block, as written
marker='<!-- tests/test_install.sh runs the next block -->'
awk -v m="$marker" '$0 == m { armed = 1; next } armed && /^```sh$/ { on = 1; next }
    on && /^```$/ { exit } on { print }' "$src/README.md" >"$tmp/readme.sh"
[ -s "$tmp/readme.sh" ] || fail "README.md has no sh block after '$marker'"
mkdir -p "$tmp/home" "$tmp/work"
ln -s "$build" "$tmp/work/build"
ln -s "$src/examples" "$tmp/work/examples"
ln -s "$src/tests" "$tmp/work/tests"
echo "--- README block:"
cat "$tmp/readme.sh"
(cd "$tmp/work" && env -u LD_LIBRARY_PATH -u PKG_CONFIG_PATH HOME="$tmp/home" bash -euxo pipefail "$tmp/readme.sh") \
    >"$tmp/readme.log" 2>&1 || { cat "$tmp/readme.log"; fail "the README's install block"; }
app=$tmp/home/fp8kit-app
for exe in app app_static build/app build/app_static; do
    [ -x "$app/$exe" ] || { cat "$tmp/readme.log"; fail "the README's block made no $exe"; }
done
grep -c 'relative error' "$tmp/readme.log" | grep -qx 4 || { cat "$tmp/readme.log"; fail "not 4 runs of the example"; }
ldd "$app/app" | grep 'libfp8kit\.so.* => /' >/dev/null || fail "app is not linked to the shared library"
for exe in app_static build/app_static; do
    if ldd "$app/$exe" | grep libfp8kit; then fail "$exe linked the shared library"; fi
done
echo "ok: the README's install block ($(grep -c . "$tmp/readme.sh") lines) built and ran app, app_static (pkg-config) and build/app, build/app_static (find_package)"
# the README's CMake listing is the consumer the block copies
awk '/^```cmake$/ { on = 1; next } on && /^```$/ { exit } on { print }' "$src/README.md" >"$tmp/readme.cmake"
[ -s "$tmp/readme.cmake" ] || fail "README.md has no cmake block"
while IFS= read -r line; do
    grep -qxF -- "$line" "$src/tests/install/CMakeLists.txt" || fail "README cmake line not in tests/install/CMakeLists.txt: $line"
done <"$tmp/readme.cmake"

# ---- 2. a moved install
cmake --install "$build" --prefix "$tmp/first" >/dev/null || fail "cmake --install"
mv "$tmp/first" "$tmp/moved"
p=$tmp/moved
libdir=$(dirname "$(find "$p" -name 'libfp8kit.a' | head -1)")
[ -d "$libdir" ] || fail "no libfp8kit.a installed"
if grep -rlF "$tmp/first" "$libdir/pkgconfig" "$libdir/cmake" >/dev/null; then
    fail "installed pkg-config / CMake files name the install prefix: $(grep -rlF "$tmp/first" "$libdir/pkgconfig" "$libdir/cmake")"
fi
[ "$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --modversion fp8kit)" = \
    "$(grep -E '^#define FP8KIT_VERSION_(MAJOR|MINOR|PATCH)' "$p/include/fp8kit.h" | awk '{print $3}' | paste -sd.)" ] ||
    fail "pkg-config --modversion disagrees with fp8kit.h"
mkdir "$tmp/consumer"
cp "$src/examples/quickstart.c" "$tmp/consumer/app.c"
cp "$src/tests/install/CMakeLists.txt" "$tmp/consumer/"
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$p" >"$tmp/consumer.log" 2>&1 &&
    cmake --build "$tmp/consumer/build" >>"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "CMake consumer of the moved install"; }
"$tmp/consumer/build/app" >/dev/null && "$tmp/consumer/build/app_static" >/dev/null || fail "CMake consumer of the moved install: run"
echo "ok: moved install: no file names the old prefix; find_package shared and static build and run"

# ---- 3. a dependency of the archive hidden from the consumer
if grep -q 'set(FP8KIT_HAS_CUDA ON)' "$libdir/cmake/fp8kit/fp8kitConfig.cmake"; then
    hidden=CUDAToolkit what="CUDA toolkit"
else
    hidden=OpenMP what="OpenMP"
fi
# PATH without nvcc (a folder of links to everything but nvcc, per PATH entry holding it)
nopath="" i=0
IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do
    if [ -e "$d/nvcc" ]; then
        i=$((i + 1)) && mkdir -p "$tmp/path$i"
        for f in "$d"/*; do [ "$(basename "$f")" = nvcc ] || ln -sf "$f" "$tmp/path$i/"; done
        d=$tmp/path$i
    fi
    nopath="${nopath:+$nopath:}$d"
done
hide() { env -u CUDACXX -u CUDA_PATH -u CUDAToolkit_ROOT PATH="$nopath" "$@"; }
rm -rf "$tmp/consumer/build"
hide cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$p" \
    -DCMAKE_DISABLE_FIND_PACKAGE_$hidden=ON >"$tmp/hidden.log" 2>&1 &&
    hide cmake --build "$tmp/consumer/build" >>"$tmp/hidden.log" 2>&1 || { cat "$tmp/hidden.log"; fail "find_package(fp8kit) with the $what hidden"; }
[ ! -e "$tmp/consumer/build/app_static" ] || fail "fp8kit::fp8kit_static defined with the $what hidden"
hide "$tmp/consumer/build/app" >/dev/null || fail "fp8kit::fp8kit program with the $what hidden: run"
if ldd "$tmp/consumer/build/app" | grep -E 'libcudart|libcuda\.so'; then fail "the shared library needs the CUDA runtime"; fi
mkdir "$tmp/static"
cat >"$tmp/static/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.22)
project(static_only LANGUAGES C)
find_package(fp8kit CONFIG REQUIRED COMPONENTS static)
EOF
if hide cmake -S "$tmp/static" -B "$tmp/static/build" -DCMAKE_PREFIX_PATH="$p" \
    -DCMAKE_DISABLE_FIND_PACKAGE_$hidden=ON >"$tmp/static.log" 2>&1; then
    fail "find_package(fp8kit COMPONENTS static) succeeded with the $what hidden"
fi
grep -qF "needs" "$tmp/static.log" && grep -qi "$what" "$tmp/static.log" ||
    { cat "$tmp/static.log"; fail "find_package(fp8kit COMPONENTS static) did not name the $what"; }
echo "ok: $what hidden: fp8kit::fp8kit builds and runs, COMPONENTS static fails naming the $what"

# ---- 4. exported symbols: the public API only
extra=$(nm -D --defined-only "$libdir/libfp8kit.so" | awk '{print $3}' | grep -v '^fp8kit_' || true)
[ -z "$extra" ] || fail "libfp8kit.so exports internal symbols: $(echo $extra | head -c 300)"
echo "ok: libfp8kit.so exports $(nm -D --defined-only "$libdir/libfp8kit.so" | grep -c ' fp8kit_') fp8kit_* symbols and nothing else"
echo "test_install: all passed"
