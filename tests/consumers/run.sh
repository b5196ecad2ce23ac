#!/usr/bin/env bash
# run.sh - issue 20's consumer suite: checkpoints written by `fp8kit quantize`
# must load in the real loaders (transformers FineGrainedFP8, compressed-tensors
# through transformers), on the CPU.
#
# Usage:
#   tests/consumers/run.sh FP8KIT_CLI [PYTHONPATH_FOR_fp8kit] [-- PYTEST_ARGS...]
#   tests/consumers/run.sh --converter mock [-- PYTEST_ARGS...]
#       (mock: tests/consumers/mock_convert.py, the numpy stand-in that writes
#        what FORMATS.md specifies; validates the harness itself)
# e.g. tests/consumers/run.sh build/fp8kit python
#      (the binding then loads the libfp8kit.so next to the CLI, unless
#       FP8KIT_LIBRARY says otherwise)
#      tests/consumers/run.sh --converter mock -- -k llama
#
# The pinned venv comes from scripts/consumers_venv.sh (made on first use,
# outside the clone). Exit status: pytest's; 77 when the venv cannot be had
# (no network on first use). FP8KIT_CONSUMERS_OUT=FILE: every result row
# (scheme, format, loader, logits error, loader-own error, ratio) is written
# there as JSON lines (the file is truncated first). The table is printed at
# the end of pytest's output either way.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

usage() {
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

converter=""
pythonpath=""
if [ $# -ge 1 ] && [ "$1" = "--converter" ]; then
    [ $# -ge 2 ] || usage
    case "$2" in
    mock) converter=mock ;;
    *) converter="$2" ;;
    esac
    shift 2
elif [ $# -ge 1 ] && [ "${1#--converter=}" != "$1" ]; then
    converter="${1#--converter=}"
    shift
elif [ $# -ge 1 ] && [ "$1" != "--" ]; then
    converter="$1"
    shift
    if [ $# -ge 1 ] && [ "$1" != "--" ]; then
        pythonpath="$1"
        shift
    fi
else
    usage
fi
[ $# -ge 1 ] && [ "$1" = "--" ] && shift

if [ "$converter" != mock ]; then
    case "$converter" in
    */*) converter="$(cd "$(dirname "$converter")" && pwd)/$(basename "$converter")" ;;
    *) converter="$(command -v "$converter" || echo "$converter")" ;;
    esac
    if [ ! -x "$converter" ]; then
        echo "run.sh: converter '$converter' is not an executable (give the fp8kit CLI, or --converter mock)" >&2
        exit 2
    fi
fi
if [ -n "$pythonpath" ]; then
    pythonpath="$(cd "$pythonpath" && pwd)" || exit 2
    # the binding should use the library built with the CLI under test
    if [ -z "${FP8KIT_LIBRARY:-}" ] && ls "$(dirname "$converter")"/libfp8kit.so* >/dev/null 2>&1; then
        export FP8KIT_LIBRARY="$(dirname "$converter")"
    fi
fi

py="$("$root/scripts/consumers_venv.sh")"
rc=$?
if [ $rc = 77 ]; then
    echo "run.sh: SKIP: no consumer venv (see scripts/consumers_venv.sh above)" >&2
    exit 77
elif [ $rc != 0 ] || [ -z "$py" ]; then
    echo "run.sh: scripts/consumers_venv.sh failed ($rc)" >&2
    exit 1
fi

export FP8KIT_CONSUMERS_CONVERTER="$converter"
export FP8KIT_CONSUMERS_PYTHONPATH="$pythonpath"
if [ -n "${FP8KIT_CONSUMERS_OUT:-}" ]; then
    : >"$FP8KIT_CONSUMERS_OUT" || exit 2
    FP8KIT_CONSUMERS_OUT="$(cd "$(dirname "$FP8KIT_CONSUMERS_OUT")" && pwd)/$(basename "$FP8KIT_CONSUMERS_OUT")"
    export FP8KIT_CONSUMERS_OUT
fi
# nothing is fetched from a model hub: the models are built here
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export TOKENIZERS_PARALLELISM=false

echo "run.sh: converter: $converter${pythonpath:+, python: $pythonpath (library: ${FP8KIT_LIBRARY:-found by fp8kit})}; venv: $py" >&2
start=$(date +%s)
cd "$root" || exit 1
"$py" -m pytest "$here" -q -p no:cacheprovider -rfxX "$@"
rc=$?
echo "run.sh: $(($(date +%s) - start)) s, pytest exit $rc" >&2
exit $rc
