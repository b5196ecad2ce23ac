#!/usr/bin/env bash
# deepgemm_build.sh - build DeepGEMM from the bundled sources, offline, on the GPU machine.
#
# Unpacks .peer/deepgemm-src.tar.xz (git-ignored: copy .peer/ along with the tree) into
# BUILD_DIR/DeepGEMM, links cutlass' cute/ and cutlass/ include folders into
# deep_gemm/include (what DeepGEMM's develop.sh does: its JIT compiles kernels with
# -I deep_gemm/include only), builds the extension in place
# (`python3 setup.py build_ext --inplace`, torch's cpp_extension: one host C++ file, no
# network), writes BUILD_DIR/env.sh with what running DeepGEMM needs, prints the version
# and runs a smoke test: `import deep_gemm`, then one small fp8_gemm_nt checked against
# torch (this runs the JIT, i.e. nvcc; DG_SMOKE_GEMM=0 skips it).
#
# Usage, from the repository root:
#   bash bench/peer/deepgemm_build.sh [BUILD_DIR]        # default /tmp/deepgemm
#   . BUILD_DIR/env.sh && python3 bench/peer/deepgemm_peer.py --out bench/results/x.jsonl
# Environment:
#   DG_BUNDLE      the bundle (default: .peer/deepgemm-src.tar.xz beside this repository)
#   CUDA_HOME      the CUDA toolkit (default: $CUDA_PATH, else nvcc's, else /usr/local/cuda)
#   DG_CXX_STD     17 or 20: the -std of the host build (default: setup.py's own c++17; a
#                  build that fails asking for C++20 is retried with 20 automatically)
#   DG_FORCE=1     rebuild even when BUILD_DIR holds a build of the same bundle
#   DG_SMOKE_GEMM  0: skip the JIT smoke GEMM
# Running DeepGEMM (what env.sh exports): PYTHONPATH=BUILD_DIR/DeepGEMM (deep_gemm and its
# tests/generators.py), CUDA_HOME (the JIT's nvcc is $CUDA_HOME/bin/nvcc unless
# DG_JIT_NVCC_COMPILER is set), DG_JIT_CACHE_DIR=BUILD_DIR/jit-cache (default would be
# $HOME/.deep_gemm), LD_LIBRARY_PATH with $CUDA_HOME/lib64 (libnvrtc / libcudart the
# extension links), and LD_PRELOAD with the system libstdc++ (without it the JIT has been
# seen to crash in std::regex). The JIT compiles each kernel at its first call (seconds
# per kernel): warm every shape up before timing.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
B=${1:-/tmp/deepgemm}
mkdir -p "$B" && B=$(cd "$B" && pwd)
bundle=${DG_BUNDLE:-$repo/.peer/deepgemm-src.tar.xz}
src=$B/DeepGEMM
log=$B/build.log
T0=$(date +%s)
say() { echo "[deepgemm_build +$(($(date +%s) - T0))s] $*"; }
die() { say "FAILED: $*"; exit 1; }

[ -f "$bundle" ] || die "no bundle at $bundle (copy .peer/ along with the tree: it is git-ignored)"
command -v python3 >/dev/null || die "python3 not found"

# --- toolchain -------------------------------------------------------------------------
if [ -z "${CUDA_HOME:-}" ]; then
    if [ -n "${CUDA_PATH:-}" ]; then CUDA_HOME=$CUDA_PATH
    elif command -v nvcc >/dev/null; then CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    else CUDA_HOME=/usr/local/cuda; fi
fi
export CUDA_HOME
export PATH=$CUDA_HOME/bin:$PATH
[ -x "$CUDA_HOME/bin/nvcc" ] || die "no nvcc in $CUDA_HOME/bin (set CUDA_HOME)"
say "CUDA_HOME=$CUDA_HOME: $(nvcc --version | grep -o 'release [0-9.]*')"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cxx11abi", torch.compiled_with_cxx11_abi())' ||
    die "torch not importable"

# the system libstdc++ for LD_PRELOAD (DeepGEMM's JIT otherwise may crash in std::regex)
stdcxx=""
for c in /usr/lib/x86_64-linux-gnu/libstdc++.so.6 "$(g++ -print-file-name=libstdc++.so.6 2>/dev/null)" \
         "$(gcc -print-file-name=libstdc++.so.6 2>/dev/null)"; do
    if [ -n "$c" ] && [ -e "$c" ]; then stdcxx=$(readlink -f "$c"); break; fi
done
[ -n "$stdcxx" ] || say "warning: no system libstdc++.so.6 found for LD_PRELOAD"

# --- unpack (skipped when BUILD_DIR holds a build of this very bundle) ---------------------
sum=$(sha256sum "$bundle" | cut -c1-16)
so=$src/deep_gemm/_C$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
if [ -z "${DG_FORCE:-}" ] && [ -e "$so" ] && [ "$(cat "$B/.bundle-sha" 2>/dev/null)" = "$sum" ]; then
    say "reusing the build in $src (bundle $sum; DG_FORCE=1 rebuilds)"
    built=1
else
    built=0
    rm -rf "$src" "$B/.bundle-sha"
    tar -xJf "$bundle" -C "$B" || die "cannot unpack $bundle"
    [ -f "$src/setup.py" ] || die "the bundle has no DeepGEMM/setup.py"
    cat "$src/BUNDLE-INFO.txt" 2>/dev/null
fi

# --- include links: deep_gemm/include/{cute,cutlass} -> third-party/cutlass/include ------
for d in cute cutlass; do
    [ -d "$src/third-party/cutlass/include/$d" ] || die "third-party/cutlass/include/$d missing from the bundle"
    ln -sfn "../../third-party/cutlass/include/$d" "$src/deep_gemm/include/$d"
done
[ -e "$src/third-party/fmt/include/fmt/format.h" ] || die "third-party/fmt/include missing from the bundle"

# --- setup.py's imports without network: packaging and wheel.bdist_wheel ------------------
# setuptools >= 71 puts its vendored packaging / wheel on sys.path; else shims from what is here
shims=$B/.shims
if ! python3 -c 'import setuptools, packaging.version, wheel.bdist_wheel' >/dev/null 2>&1; then
    mkdir -p "$shims"
    if ! python3 -c 'import setuptools, packaging.version' >/dev/null 2>&1; then
        p=$(python3 -c 'import os, pip._vendor.packaging as p; print(os.path.dirname(p.__file__))' 2>/dev/null) &&
            ln -sfn "$p" "$shims/packaging"
    fi
    if ! python3 -c 'import setuptools, wheel.bdist_wheel' >/dev/null 2>&1; then
        mkdir -p "$shims/wheel"
        : >"$shims/wheel/__init__.py"
        cat >"$shims/wheel/bdist_wheel.py" <<'EOF'
# shim written by fp8kit's deepgemm_build.sh: setup.py imports this name; build_ext never uses it
try:
    from setuptools.command.bdist_wheel import bdist_wheel  # noqa: F401
except ImportError:
    from setuptools import Command as bdist_wheel  # noqa: F401
EOF
    fi
    export PYTHONPATH=$shims${PYTHONPATH:+:$PYTHONPATH}
    python3 -c 'import setuptools, packaging.version, wheel.bdist_wheel' || die "setup.py's imports (packaging, wheel) unavailable"
    say "using shims in $shims for setup.py's imports"
fi

# cublasLt.h (csrc includes it): the toolkit's, else the nvidia-cublas wheel's that torch brought
if [ ! -e "$CUDA_HOME/include/cublasLt.h" ]; then
    inc=$(python3 -c 'import os, nvidia.cublas as c; print(os.path.join(list(c.__path__)[0], "include"))' 2>/dev/null)
    [ -n "$inc" ] && [ -e "$inc/cublasLt.h" ] && export CPATH=$inc${CPATH:+:$CPATH} && say "cublasLt.h from $inc"
fi

# --- build ---------------------------------------------------------------------------------
if [ "$built" = 0 ]; then
    build() { # build [STD]: setup.py build_ext --inplace, -std patched to STD when given
        if [ -n "${1:-}" ]; then
            sed -i "s/'-std=c++[0-9]*'/'-std=c++$1'/" "$src/setup.py"
            grep -q "'-std=c++$1'" "$src/setup.py" || return 1
        fi
        say "python3 setup.py build_ext --inplace${1:+ (-std=c++$1)} (log: $log)"
        (cd "$src" && DG_USE_LOCAL_VERSION=0 MAX_JOBS=${MAX_JOBS:-$(nproc)} \
            python3 setup.py build_ext --inplace) >"$log" 2>&1
    }
    if ! build "${DG_CXX_STD:-}"; then
        if [ -z "${DG_CXX_STD:-}" ] && grep -q "C++20" "$log"; then
            say "the build asks for C++20: retrying with -std=c++20"
            build 20 || { tail -40 "$log"; die "build (c++20) failed"; }
        else
            tail -40 "$log"
            die "build failed"
        fi
    fi
    [ -e "$so" ] || { tail -20 "$log"; die "no $so after the build"; }
    echo "$sum" >"$B/.bundle-sha"
    say "built $so"
fi

# --- env.sh: what running DeepGEMM needs ---------------------------------------------------
mkdir -p "$B/jit-cache"
{
    echo "# written by bench/peer/deepgemm_build.sh: source it before running DeepGEMM"
    echo "export CUDA_HOME=$CUDA_HOME"
    echo "export PATH=$CUDA_HOME/bin:\$PATH"
    echo "export PYTHONPATH=$src\${PYTHONPATH:+:\$PYTHONPATH}"
    echo "export DG_JIT_CACHE_DIR=\${DG_JIT_CACHE_DIR:-$B/jit-cache}"
    echo "export LD_LIBRARY_PATH=$CUDA_HOME/lib64\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
    [ -n "$stdcxx" ] && echo "export LD_PRELOAD=$stdcxx\${LD_PRELOAD:+:\$LD_PRELOAD}"
    [ -n "${CPATH:-}" ] && echo "export CPATH=$CPATH"
} >"$B/env.sh"
say "wrote $B/env.sh:"
sed 's/^/    /' "$B/env.sh"

# --- smoke test ------------------------------------------------------------------------------
# shellcheck disable=SC1091
. "$B/env.sh"
python3 -c 'import deep_gemm; print("deep_gemm", deep_gemm.__version__, "from", deep_gemm.__path__[0])' ||
    die "import deep_gemm failed"
if [ "${DG_SMOKE_GEMM:-1}" != 0 ]; then
    say "smoke GEMM (JIT: nvcc compiles one kernel)"
    (cd "$src/tests" && python3 - <<'EOF') || die "smoke GEMM failed"
import torch, deep_gemm
from generators import KernelType, MajorTypeAB, generate_normal
m, n, k = 256, 512, 1024
a, b, c, d, ref = generate_normal(m, n, k, MajorTypeAB.KMajor, MajorTypeAB.KMajor, False, torch.bfloat16,
                                  KernelType.Kernel1D2D, use_ue8m0=False)
deep_gemm.fp8_gemm_nt(a, b, d, disable_ue8m0_cast=True)
diff = deep_gemm.testing.calc_diff(d, ref)
print("smoke fp8_gemm_nt %dx%dx%d on %s: calc_diff vs the bf16 product %.2e" % (m, n, k, torch.cuda.get_device_name(), diff))
assert diff < 1e-3, diff
EOF
fi
say "done: DeepGEMM $(cd "$src" && python3 -c 'import deep_gemm; print(deep_gemm.__version__)' 2>/dev/null) in $src"
echo "run: . $B/env.sh && python3 bench/peer/deepgemm_peer.py --out bench/results/deepgemm-peer.jsonl"
