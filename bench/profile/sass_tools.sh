#!/usr/bin/env bash
# sass_tools.sh - puts cuobjdump and nvdisasm on this machine when its CUDA toolkit lacks them
# (the CUDA 13 install here has nvcc and ptxas only): NVIDIA's PyPI wheels, unpacked into
# ~/.cache/fp8kit/sass-tools. Prints the folder that holds both; use it as
#   export PATH=$(bash bench/profile/sass_tools.sh):$PATH
set -euo pipefail
command -v cuobjdump >/dev/null && command -v nvdisasm >/dev/null && { dirname "$(command -v cuobjdump)"; exit 0; }
d=${FK_SASS_TOOLS:-$HOME/.cache/fp8kit/sass-tools}
if [ ! -x "$d/bin/cuobjdump" ] || [ ! -x "$d/bin/nvdisasm" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    python3 -m pip download -q --no-deps -d "$tmp" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm >&2
    mkdir -p "$d/bin"
    for w in "$tmp"/*.whl; do python3 -m zipfile -e "$w" "$tmp/x" >/dev/null; done
    find "$tmp/x" -type f \( -name cuobjdump -o -name nvdisasm \) -exec cp {} "$d/bin/" \;
    chmod +x "$d/bin/cuobjdump" "$d/bin/nvdisasm"
fi
echo "$d/bin"
