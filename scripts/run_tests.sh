#!/usr/bin/env bash
# run_tests.sh - quick start, command 2 of 2 (and what CI runs): installs what
# is missing (scripts/bootstrap.sh), then builds fp8kit with its tests (Release,
# compiler warnings as errors: FP8KIT_WERROR)
# and runs CTest in every configuration this machine can build:
#   cuda    - the CUDA backend compiled (when a CUDA compiler is found), into build/
#   nocuda  - the CUDA compiler hidden (CUDACXX pointing nowhere, nvcc off PATH),
#             FP8KIT_CUDA=AUTO: what a machine without the CUDA toolkit builds,
#             into build-nocuda/
# On a machine without nvcc only the second exists (into build/). GPU tests skip
# (exit 77) without a GPU. Prints each configuration's CTest summary; exits
# non-zero when any test of any configuration fails.
# The first run's test_consumers makes a pinned venv of the real checkpoint
# loaders (about 5.6 GB, into ~/.cache/fp8kit/consumers-venv; see
# scripts/consumers_venv.sh); `-E test_consumers` skips it.
# Usage: scripts/run_tests.sh [extra ctest options, e.g. -R test_cli, -E test_consumers]
# Environment: FP8KIT_CUDA=ON|OFF builds only that configuration (AUTO: both when
#              nvcc is found), FP8KIT_BUILD_DIR (default build), FP8KIT_SANITIZE
#              (ON for ASan/UBSan), JOBS (default: number of cores).
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh || exit 1

build="${FP8KIT_BUILD_DIR:-build}"
mode="${FP8KIT_CUDA:-AUTO}"
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export CUDACXX=/usr/local/cuda/bin/nvcc
fi
have_nvcc=0
if [ -n "${CUDACXX:-}" ] && [ -x "${CUDACXX}" ]; then have_nvcc=1; fi
if command -v nvcc >/dev/null 2>&1; then have_nvcc=1; fi

# PATH with every nvcc shadowed: each PATH directory holding nvcc is replaced by
# a directory of links to everything in it but nvcc.
path_without_nvcc() {
    local shadow=$1 out="" d i=0
    local IFS=:
    for d in $PATH; do
        if [ -e "$d/nvcc" ]; then
            i=$((i + 1))
            mkdir -p "$shadow/$i"
            for f in "$d"/*; do
                [ "$(basename "$f")" = nvcc ] || ln -sf "$f" "$shadow/$i/"
            done
            d="$shadow/$i"
        fi
        out="${out:+$out:}$d"
    done
    printf '%s' "$out"
}

# one configuration: name, build dir, FP8KIT_CUDA value, hide (0|1), ctest args...
run_config() {
    local name=$1 dir=$2 cuda=$3 hide=$4
    shift 4
    echo "=== configuration '$name' (FP8KIT_CUDA=$cuda$([ "$hide" = 1 ] && echo ', CUDA compiler hidden')) in $dir ==="
    (
        if [ "$hide" = 1 ]; then
            shadow=$(mktemp -d)
            trap 'rm -rf "$shadow"' EXIT
            PATH=$(path_without_nvcc "$shadow")
            export PATH CUDACXX=/nonexistent/nvcc
            if command -v nvcc >/dev/null 2>&1; then
                echo "run_tests: could not hide nvcc ($(command -v nvcc))" >&2
                exit 1
            fi
        fi
        mkdir -p "$dir"
        log="$dir/run_tests-configure.log"
        cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DFP8KIT_CUDA="$cuda" \
            -DFP8KIT_SANITIZE="${FP8KIT_SANITIZE:-OFF}" -DFP8KIT_TESTS=ON -DFP8KIT_WERROR=ON >"$log" 2>&1 ||
            { cat "$log"; exit 1; }
        grep -E "fp8kit: (CUDA backend|backends built in)" "$log"
        if [ "$hide" = 1 ] && ! grep -q "fp8kit: CUDA backend OFF" "$log"; then
            echo "run_tests: configuration '$name' found a CUDA compiler" >&2
            exit 1
        fi
        cmake --build "$dir" -j "${JOBS:-$(nproc)}" || exit 1
        cd "$dir" && ctest -j2 --output-on-failure "$@"
    )
}

configs=()
case "$mode" in
    OFF) configs+=("cpu-only $build OFF 0") ;;
    ON) configs+=("cuda $build ON 0") ;;
    *)
        if [ "$have_nvcc" = 1 ]; then
            configs+=("cuda $build AUTO 0" "nocuda $build-nocuda AUTO 1")
        else
            configs+=("nocuda $build AUTO 0")
        fi ;;
esac

ctest_args=("$@")
status=0
summary=""
for c in "${configs[@]}"; do
    read -r name dir cuda hide <<<"$c"
    run_config "$name" "$dir" "$cuda" "$hide" "${ctest_args[@]}"
    rc=$?
    summary="$summary
configuration '$name' ($dir): $([ $rc = 0 ] && echo passed || echo "FAILED (exit $rc)")"
    [ $rc = 0 ] || status=1
done
echo "=== run_tests summary ===$summary"
exit $status
