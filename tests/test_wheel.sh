#!/usr/bin/env bash
# test_wheel.sh - the Python package as pip builds it from the repository root
# (pyproject.toml, scikit-build-core + CMake):
#  1. `python -m build` makes the sdist, then the wheel from that sdist, each in
#     its own fresh build venv; the sdist holds the C and CUDA sources, the
#     wheel holds fp8kit/libfp8kit.so and the version file, its metadata an SPDX
#     license; the build says which backends went in;
#  2. the wheel installs into a fresh venv, where the package loads its own
#     library and scaled_mm on the CPU equals numpy (tests/wheel/check_installed.py);
#  3. a wheel whose library cannot be built is a build error: FP8KIT_CUDA=ON with
#     no CUDA compiler fails and writes no wheel, and python/ alone is no project.
# The test builds with FP8KIT_CUDA=OFF (the CUDA backend is compiled by the
# default, AUTO, when nvcc is found; the CTest build compiles it already).
# Exit 77 (skipped) only when a venv with the build tools (build,
# scikit-build-core, from the package index) cannot be made.
# Usage: tests/test_wheel.sh [ignored: CTest passes the CLI's path]
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
quiet() { "$@" >"$tmp/step.log" 2>&1 || { cat "$tmp/step.log"; return 1; }; }

command -v "$py" >/dev/null || skip "no $py"
"$py" -m venv "$tmp/tools" >/dev/null 2>&1 && "$tmp/tools/bin/python" -m pip --version >/dev/null 2>&1 ||
    skip "$py cannot make a venv with pip (Debian: python3-venv)"
tools=$tmp/tools/bin/python
"$tools" -m pip install -q build scikit-build-core >"$tmp/pip.log" 2>&1 ||
    { cat "$tmp/pip.log"; skip "pip cannot install build and scikit-build-core (no package index?)"; }
version=$(grep -E '^#define FP8KIT_VERSION_(MAJOR|MINOR|PATCH) ' "$src/include/fp8kit.h" | awk '{print $3}' | paste -sd.)

# ---- 1. sdist, then the wheel from it (python -m build's default), CPU only
env -u FP8KIT_LIBRARY -u CMAKE_ARGS "$tools" -m build --outdir "$tmp/dist" -C cmake.define.FP8KIT_CUDA=OFF "$src" \
    >"$tmp/build.log" 2>&1 || { tail -60 "$tmp/build.log"; fail "python -m build (sdist, then wheel from it)"; }
sdist=$(ls "$tmp/dist"/fp8kit-"$version".tar.gz 2>/dev/null) || fail "no sdist fp8kit-$version.tar.gz: $(ls "$tmp/dist")"
wheel=$(ls "$tmp/dist"/fp8kit-"$version"-*.whl 2>/dev/null) || fail "no wheel: $(ls "$tmp/dist")"
grep -q "fp8kit: backends built in: cpu;" "$tmp/build.log" || { tail -60 "$tmp/build.log"; fail "the build does not say which backends went in"; }
if grep -iE "deprecat.*licen|licen.*deprecat" "$tmp/build.log"; then fail "a license deprecation warning"; fi
tar -tzf "$sdist" | sed 's|^[^/]*/||' >"$tmp/sdist.txt"
for f in pyproject.toml CMakeLists.txt LICENSE include/fp8kit.h src/core/backends.c.in scripts/fp8kit.map \
    python/fp8kit/__init__.py python/README.md examples/quickstart.c; do
    grep -qxF "$f" "$tmp/sdist.txt" || fail "the sdist lacks $f"
done
grep -qE '^src/cuda/.*\.cu$' "$tmp/sdist.txt" || fail "the sdist lacks the CUDA sources"
grep -qE '^src/cpu/.*\.c$' "$tmp/sdist.txt" || fail "the sdist lacks the CPU sources"
if grep -E '^(build[^/]*|bench/results|dist)/' "$tmp/sdist.txt" | head -3 | grep .; then fail "the sdist holds build output or logs"; fi
"$tools" - "$wheel" "$version" <<'EOF' || fail "wheel contents"
import sys, zipfile
wheel, version = sys.argv[1], sys.argv[2]
names = zipfile.ZipFile(wheel).namelist()
for need in ("fp8kit/libfp8kit.so", "fp8kit/_version.py", "fp8kit/__init__.py", "fp8kit/_lib.py", "fp8kit/py.typed"):
    assert need in names, "the wheel lacks %s: %s" % (need, names)
tops = {n.split("/")[0] for n in names}
assert tops == {"fp8kit", "fp8kit-%s.dist-info" % version}, tops  # no include/, lib/, bin/ of the C install
z = zipfile.ZipFile(wheel)
meta = z.read("fp8kit-%s.dist-info/METADATA" % version).decode()
assert "\nVersion: %s\n" % version in meta and "\nLicense-Expression: MIT\n" in meta, meta[:800]
assert "License ::" not in meta, meta[:800]
assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
assert b"__version__ = \"%s\"" % version.encode() in z.read("fp8kit/_version.py")
lib = z.read("fp8kit/libfp8kit.so")
assert lib[:4] == b"\x7fELF" and b"fp8kit_gemm" in lib
tag = [n for n in names if n.endswith(".dist-info/WHEEL")][0]
assert "Root-Is-Purelib: false" in z.read(tag).decode()
print("ok: wheel %s: %d files, libfp8kit.so %.1f MB" % (wheel.rsplit("/", 1)[1], len(names), len(lib) / 1e6))
EOF
echo "ok: sdist $(basename "$sdist") ($(wc -l <"$tmp/sdist.txt") files, C and CUDA sources), wheel built from it; $(grep -o 'fp8kit: backends built in: [^;]*' "$tmp/build.log" | head -1)"

# ---- 2. install into a fresh venv, run from outside the checkout
quiet "$py" -m venv "$tmp/use" || fail "venv for the install"
quiet "$tmp/use/bin/python" -m pip install -q "$wheel" || fail "pip install of the wheel"
(cd "$tmp" && env -u FP8KIT_LIBRARY -u PYTHONPATH -u LD_LIBRARY_PATH "$tmp/use/bin/python" \
    "$src/tests/wheel/check_installed.py" "$version") || fail "the installed package"

# ---- 3. no library, no wheel
mkdir "$tmp/unpacked" && tar -xzf "$sdist" -C "$tmp/unpacked"
if env CUDACXX=/nonexistent/nvcc "$tools" -m build --wheel --no-isolation --outdir "$tmp/bad" \
    -C cmake.define.FP8KIT_CUDA=ON "$tmp/unpacked/fp8kit-$version" >"$tmp/bad.log" 2>&1; then
    fail "FP8KIT_CUDA=ON without a CUDA compiler built a wheel"
fi
grep -q "FP8KIT_CUDA=ON but no CUDA compiler was found" "$tmp/bad.log" || { tail -30 "$tmp/bad.log"; fail "no CMake error in the failed build"; }
[ -z "$(ls "$tmp/bad" 2>/dev/null)" ] || fail "a failed build left $(ls "$tmp/bad")"
if "$tools" -m build --wheel --no-isolation --outdir "$tmp/bad" "$src/python" >"$tmp/bad.log" 2>&1; then
    fail "python/ alone built a wheel (without the library)"
fi
echo "ok: a build whose library fails is an error and leaves no wheel; python/ alone is not a project"
echo "test_wheel: all passed"
