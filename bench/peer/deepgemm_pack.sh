#!/usr/bin/env bash
# deepgemm_pack.sh - here, no GPU needed: makes the DeepGEMM source bundle that
# deepgemm_build.sh builds on the GPU machine (.peer/deepgemm-src.tar.xz,
# git-ignored: carry ".peer"), from clones of the three repositories at the
# pinned commits of README.md's "The bundle" table.
# Usage (repository root): bash bench/peer/deepgemm_pack.sh DEEPGEMM_GIT CUTLASS_GIT FMT_GIT [OUT]
#   each argument a clone (or git dir) holding its pinned commit; OUT default
#   .peer/deepgemm-src.tar.xz
set -euo pipefail
dg=${1:?usage: deepgemm_pack.sh DEEPGEMM_GIT CUTLASS_GIT FMT_GIT [OUT]}
cutlass=${2:?usage: deepgemm_pack.sh DEEPGEMM_GIT CUTLASS_GIT FMT_GIT [OUT]}
fmt=${3:?usage: deepgemm_pack.sh DEEPGEMM_GIT CUTLASS_GIT FMT_GIT [OUT]}
out=${4:-.peer/deepgemm-src.tar.xz}
dg_c=54e22612409371d6364144b69086735beb54e98b      # DeepGEMM 2.6.1, 2026-06-23
cutlass_c=f3fde58372d33e9a5650ba7b80fc48b3b49d40c8 # v4.2.1, DeepGEMM's submodule pin
fmt_c=553ec11ec06fbe0beebfbb45f9dc3c9eabd83d28     # 11.2.0-57, DeepGEMM's submodule pin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
d=$tmp/DeepGEMM
mkdir -p "$d/third-party/cutlass" "$d/third-party/fmt"
git -C "$dg" archive "$dg_c" setup.py LICENSE README.md develop.sh scripts/generate_pyi.py csrc deep_gemm tests |
    tar -x -C "$d"
git -C "$cutlass" archive "$cutlass_c" include/cute include/cutlass LICENSE.txt | tar -x -C "$d/third-party/cutlass"
git -C "$fmt" archive "$fmt_c" include LICENSE | tar -x -C "$d/third-party/fmt"
printf 'DeepGEMM %s\ncutlass %s\nfmt %s\n' "$dg_c" "$cutlass_c" "$fmt_c" >"$d/BUNDLE-INFO.txt"
mkdir -p "$(dirname "$out")"
tar cJf "$out" -C "$tmp" DeepGEMM
ls -la "$out"
