#!/usr/bin/env bash
# bootstrap.sh - installs what a fresh Debian/Ubuntu machine lacks to build and
# test fp8kit: cmake, gcc, make, pkg-config, libopenblas-dev (CPU GEMM peer in the
# benchmarks), libjansson-dev (safetensors reader), python3, python3-pip, and
# the python packages numpy + safetensors + pytest (pip --user) for
# tests/test_st_cli.py and python/tests.
# Only missing packages are installed (apt-get, non-interactive), as root or via
# sudo. The CUDA toolkit is never installed here: the CUDA backend is built
# when nvcc is found, and a machine without a GPU is fine.
# Usage: scripts/bootstrap.sh        (FP8KIT_NO_APT=1 skips every install)
set -euo pipefail

say() { printf 'bootstrap: %s\n' "$*" >&2; }

# package -> a check that succeeds when what we need from it is present
have_pkg() {
    case "$1" in
    cmake) command -v cmake >/dev/null 2>&1 ;;
    gcc) command -v gcc >/dev/null 2>&1 ;;
    make) command -v make >/dev/null 2>&1 ;;
    pkg-config) command -v pkg-config >/dev/null 2>&1 ;;
    python3) command -v python3 >/dev/null 2>&1 ;;
    python3-pip) command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1 ;;
    libopenblas-dev | libjansson-dev)
        # pkg-config first: finds a copy outside the package manager (PKG_CONFIG_PATH)
        { command -v pkg-config >/dev/null 2>&1 &&
            pkg-config --exists "$(echo "$1" | sed 's/^lib//; s/-dev$//')"; } ||
            { command -v dpkg-query >/dev/null 2>&1 &&
                dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; } ;;
    *) return 1 ;;
    esac
}

required="cmake gcc make pkg-config libjansson-dev" # without these nothing builds (jansson: safetensors)
optional="libopenblas-dev python3 python3-pip"

missing=""
for p in $required $optional; do
    have_pkg "$p" || missing="$missing $p"
done
missing="${missing# }"

if [ -z "$missing" ]; then
    say "all build dependencies present"
else
    say "missing: $missing"
    SUDO=""
    can_install=1
    if [ "${FP8KIT_NO_APT:-0}" = 1 ]; then
        say "FP8KIT_NO_APT=1: not installing"
        can_install=0
    elif ! command -v apt-get >/dev/null 2>&1; then
        say "apt-get not found (not Debian/Ubuntu): install the packages above yourself"
        can_install=0
    elif [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            SUDO="sudo -n"
        else
            say "not root and no password-less sudo: cannot install"
            can_install=0
        fi
    fi
    if [ "$can_install" = 1 ]; then
        export DEBIAN_FRONTEND=noninteractive
        $SUDO apt-get update -qq || say "apt-get update failed; trying to install anyway"
        # shellcheck disable=SC2086
        if ! $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null; then
            say "installing all at once failed; trying one by one"
            for p in $missing; do
                $SUDO apt-get install -y -qq --no-install-recommends "$p" >/dev/null ||
                    say "could not install $p"
            done
        fi
    fi
    for p in $required; do
        if ! have_pkg "$p"; then
            say "ERROR: $p is required and still missing"
            exit 1
        fi
    done
    for p in $optional; do
        have_pkg "$p" || say "warning: $p still missing (optional features will be skipped)"
    done
fi

if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    say "nvcc found: the CUDA backend will be built"
else
    say "nvcc not found: CPU-only build"
fi
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    say "GPU: $(nvidia-smi -L | head -1)"
else
    say "no GPU visible: GPU tests will be skipped"
fi
# Python packages of tests/test_st_cli.py: the reference safetensors package
# and numpy (pip, per user; Debian's system python refuses plain pip
# installs (PEP 668), so retry with --break-system-packages, which with
# --user only touches ~/.local).
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import numpy, safetensors, pytest' >/dev/null 2>&1; then
    if [ "${FP8KIT_NO_PIP:-0}" = 1 ]; then
        say "FP8KIT_NO_PIP=1: not installing numpy/safetensors (test_st_cli will be skipped)"
    elif python3 -m pip --version >/dev/null 2>&1; then
        say "installing python packages: numpy safetensors pytest (pip --user)"
        python3 -m pip install --user --quiet numpy safetensors pytest >/dev/null 2>&1 ||
            python3 -m pip install --user --quiet --break-system-packages numpy safetensors pytest >/dev/null 2>&1 ||
            say "warning: pip could not install numpy/safetensors (test_st_cli will be skipped)"
    else
        say "warning: no pip: numpy/safetensors missing (test_st_cli will be skipped)"
    fi
fi
exit 0
