#!/usr/bin/env bash
# consumers_venv.sh - creates (or reuses) the Python venv of tests/consumers/:
# the real checkpoint loaders that fp8kit's converted checkpoints must load in
# (transformers' FineGrainedFP8 path, compressed-tensors through transformers),
# with a CPU torch, all at pinned versions.
#
# The venv lives OUTSIDE the clone:
#   ${FP8KIT_CONSUMERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/fp8kit/consumers-venv}
# (about 5.6 GB: torch, transformers and their dependencies) and is reused as
# long as its key matches and it imports the loaders: the key is the pins, the
# recipe and the interpreter's Python major.minor (a patch release of python3
# keeps the venv; a new minor release has another ABI, so other wheels).
# Otherwise it is rebuilt from scratch.
#
# Usage: scripts/consumers_venv.sh         make or reuse the venv
#        scripts/consumers_venv.sh --key   print the key the venv is made under
#                                          for FP8KIT_PYTHON, and do nothing else
# stdout: the venv's python path (or the key), one line, nothing else (logs go
# to stderr).
# exit 0: ready; 77: skipped (no network / no way to make a venv: reason on
# stderr and stdout stays empty); 1: a real failure; 2: unknown argument.
#
# Environment:
#   FP8KIT_CONSUMERS_VENV   venv directory (default above)
#   FP8KIT_PYTHON           interpreter the venv is made from (default python3)
#   FP8KIT_TORCH_INDEX_URL  index with CPU-only torch wheels (default: PyTorch's
#                           CPU wheel index); when it cannot be reached, torch is
#                           taken from the default index (on Linux that is the
#                           CUDA build, which runs fine on a CPU-only machine,
#                           only larger)
#   FP8KIT_NO_APT=1         never apt-get (python3-venv missing -> exit 77)
#   FP8KIT_CONSUMERS_FORCE=1  rebuild even if the stamp matches
set -euo pipefail

say() { printf 'consumers_venv: %s\n' "$*" >&2; }
skip() {
    say "SKIP: $*"
    exit 77
}

# ---- pins (newest versions that work together on CPU, checked 2026-11) ----
# transformers 5.24.0 + compressed-tensors 0.20.0 are the loader versions the
# consumer tests were written against.
PIN_TORCH="torch==2.15.0"
PINS=(
    "transformers==5.24.0"
    "compressed-tensors==0.20.0"
    "safetensors==0.8.0"
    "numpy==2.4.6" # 2.5 needs python >= 3.12; Debian 12 has 3.11
    "accelerate==1.15.0"
    "pytest==9.2.0"
)
RECIPE=3 # bump when the way the venv is built changes

PY="${FP8KIT_PYTHON:-python3}"
VENV="${FP8KIT_CONSUMERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/fp8kit/consumers-venv}"
TORCH_INDEX="${FP8KIT_TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"

mode=make
case "${1:-}" in
"") ;;
--key) mode=key ;;
*)
    say "unknown argument '$1' (usage: consumers_venv.sh [--key])"
    exit 2 ;;
esac

command -v "$PY" >/dev/null 2>&1 || skip "no $PY"
pyver="$("$PY" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
pyminor="${pyver%.*}"
stamp_text="recipe=$RECIPE python=$pyminor $PIN_TORCH ${PINS[*]}"
if [ "$mode" = key ]; then
    printf '%s\n' "$stamp_text"
    exit 0
fi
stamp_file="$VENV/.fp8kit-consumers-stamp"
vpy="$VENV/bin/python"

# ---- reuse ----
# (a stamp written before the key dropped the patch release, "python=3.11.7",
# is the same key)
stamp_key() { sed -E 's/ python=([0-9]+\.[0-9]+)\.[0-9]+ / python=\1 /' "$stamp_file"; }
if [ "${FP8KIT_CONSUMERS_FORCE:-0}" != 1 ] && [ -x "$vpy" ] && [ -f "$stamp_file" ] &&
    [ "$(stamp_key)" = "$stamp_text" ] &&
    "$vpy" -c 'import torch, transformers, compressed_tensors, safetensors, numpy, pytest' >/dev/null 2>&1; then
    say "reusing $VENV"
    [ "$(cat "$stamp_file")" = "$stamp_text" ] || printf '%s\n' "$stamp_text" >"$stamp_file"
    printf '%s\n' "$vpy"
    exit 0
fi

# ---- python3-venv (Debian splits ensurepip/venv out of python3) ----
venv_ok() {
    local t
    t="$(mktemp -d)"
    if "$PY" -m venv "$t/v" >/dev/null 2>&1 && [ -x "$t/v/bin/python" ] &&
        "$t/v/bin/python" -m pip --version >/dev/null 2>&1; then
        rm -rf "$t"
        return 0
    fi
    rm -rf "$t"
    return 1
}
if ! venv_ok; then
    say "$PY cannot make a venv with pip (Debian: python3-venv missing)"
    if [ "${FP8KIT_NO_APT:-0}" = 1 ]; then
        skip "FP8KIT_NO_APT=1 and no working venv module"
    fi
    command -v apt-get >/dev/null 2>&1 || skip "no apt-get to install python3-venv"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            SUDO="sudo -n"
        else
            skip "not root and no password-less sudo: install python3-venv yourself"
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    pv="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    $SUDO apt-get update -qq >&2 || say "apt-get update failed; trying to install anyway"
    $SUDO apt-get install -y -qq --no-install-recommends python3-venv "python$pv-venv" >&2 ||
        $SUDO apt-get install -y -qq --no-install-recommends python3-venv >&2 ||
        skip "apt-get could not install python3-venv (no network?)"
    venv_ok || skip "still no working venv after installing python3-venv (is $PY Debian's python?)"
fi

# ---- build the venv afresh, in place; the stamp is written last, so an
# interrupted build is never taken for a ready venv ----
mkdir -p "$(dirname "$VENV")"
rm -rf "$VENV"
say "creating $VENV ($PY $pyver; about 5.6 GB, downloaded once)"
"$PY" -m venv "$VENV" >&2
tpy="$vpy"
pipi() { "$tpy" -m pip install --disable-pip-version-check -q "$@" >&2; }

# ---- network: can pip reach its index at all? (the venv's own pip: a fresh
# Debian has no pip for the system python; no host named here: pip's own
# configuration decides, so mirrors work) ----
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
if ! timeout 120 "$tpy" -m pip download --no-deps --no-cache-dir --disable-pip-version-check \
    -q -d "$probe" "${PINS[0]}" >/dev/null 2>&1; then
    rm -rf "$VENV"
    skip "pip cannot download ${PINS[0]} (no network or no package index)"
fi
rm -rf "$probe"/*
pipi --upgrade pip || say "warning: could not upgrade pip (going on with the bundled one)"

# torch first, CPU-only wheels if that index is reachable
if timeout 60 "$tpy" -m pip download --no-deps -q -d "$probe" --index-url "$TORCH_INDEX" \
    "$PIN_TORCH" >/dev/null 2>&1; then
    say "torch: $PIN_TORCH from the CPU wheel index"
    pipi --index-url "$TORCH_INDEX" "$PIN_TORCH"
else
    say "torch: CPU wheel index unreachable; $PIN_TORCH from the default index (CUDA build, used on the CPU)"
    pipi "$PIN_TORCH"
fi
rm -rf "$probe"/*
# the rest from the default index; torch is pinned again so nothing moves it
# (the CPU build's version is "2.15.0+cpu", which "==2.15.0" accepts)
pipi "$PIN_TORCH" "${PINS[@]}"

"$tpy" - >&2 <<'EOF'
import torch, transformers, compressed_tensors, safetensors, numpy, pytest
x = torch.ones(4, dtype=torch.float8_e4m3fn).float()
assert float(x.sum()) == 4.0
print("torch", torch.__version__, "transformers", transformers.__version__,
      "compressed-tensors", compressed_tensors.__version__, "numpy", numpy.__version__)
EOF

printf '%s\n' "$stamp_text" >"$stamp_file"
say "ready: $VENV"
printf '%s\n' "$vpy"
