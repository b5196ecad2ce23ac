#!/usr/bin/env bash
# test_ckpt_structure.sh - the checkpoint converter's structure.
# One way in: the CLI (tools/) converts through the public
# fp8kit_checkpoint_quantize / fp8kit_checkpoint_dequantize, as Python does;
# no file of tools/ calls the internal entry st_convert or fills its options
# (st_conv_opts, st_mem_ops).
# A checkpoint format is a row of one table
# (src/io/st_format.c: scale names, dtypes, shapes, quantization_config), not
# a branch: no other file of the converter (src/io) names a particular
# format (ST_FORMAT_FP8, ST_FORMAT_COMPRESSED_TENSORS, the FP8KIT_CKPT_FORMAT_
# values) or a format's scale-tensor name ("_scale_inv", "_scale",
# "weight_scale..."), apart from the enum that indexes the rows
# (src/io/safetensors.h). A new format is then one row and one enum value.
# Then, through the CLI: every format the help lists writes and reads back.
# Usage: tests/test_ckpt_structure.sh path/to/fp8kit
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
cli="${1:-}"
fail=0
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

cd "$root" || exit 1
hits=$(grep -nE '\bst_convert[[:space:]]*\(|\bst_conv_opts\b|\bst_mem_ops\b' tools/*.c tools/*.h)
[ -z "$hits" ] || bad "tools/ drives the converter through its internal entry, not fp8kit_checkpoint_*: $(echo "$hits" | head -3 | tr '\n' ' ')"
grep -q 'fp8kit_checkpoint_quantize' tools/cli_st.c && grep -q 'fp8kit_checkpoint_dequantize' tools/cli_st.c ||
    bad "tools/cli_st.c does not call fp8kit_checkpoint_quantize / fp8kit_checkpoint_dequantize"

for f in src/io/*.c src/io/*.h; do
    case "$f" in src/io/st_format.c) continue ;; esac
    # code only: drop /* ... */ comments (one line or several) and // comments
    code=$(sed -e ':a' -e 's|/\*[^*]*\*\+\([^/*][^*]*\*\+\)*/||g' -e '/\/\*/{N;ba' -e '}' -e 's|//.*$||' "$f")
    if [ "$f" = src/io/safetensors.h ]; then # the enum itself
        code=$(printf '%s\n' "$code" | grep -vE '^\s*ST_FORMAT_(FP8|COMPRESSED_TENSORS) = [0-9]+,')
    fi
    hits=$(printf '%s\n' "$code" | grep -nE 'ST_FORMAT_(FP8|COMPRESSED_TENSORS)\b|FP8KIT_CKPT_FORMAT_(FP8|COMPRESSED_TENSORS)\b|"_scale(_inv)?"|"weight_scale')
    [ -z "$hits" ] || bad "$f branches on a particular checkpoint format (its row in st_format.c should say it): $(echo "$hits" | head -3 | tr '\n' ' ')"
done

# every format the CLI offers round-trips a weight (the rows are complete)
if [ -n "$cli" ] && "$cli" quantize --help >/dev/null 2>&1 && command -v python3 >/dev/null &&
    python3 -c "import numpy, safetensors" 2>/dev/null; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    python3 - "$tmp/in.safetensors" <<'EOF'
import sys
import numpy as np
from safetensors.numpy import save_file
rng = np.random.default_rng(7)
save_file({"layer.weight": rng.standard_normal((256, 256)).astype(np.float32)}, sys.argv[1])
EOF
    formats=$("$cli" quantize --help | sed -n 's/.*\[--format \([^]]*\)\].*/\1/p' | head -1 | tr '|' ' ')
    [ -n "$formats" ] || bad "quantize --help lists no --format"
    for fmt in $formats; do
        for scheme in fp8-tensor fp8-row fp8-block mxfp8; do
            out="$tmp/q-$fmt-$scheme.safetensors"
            if ! "$cli" quantize "$tmp/in.safetensors" "$out" --scheme "$scheme" --format "$fmt" -q 2>"$tmp/err"; then
                grep -q "has no $scheme layout" "$tmp/err" || bad "quantize --scheme $scheme --format $fmt: $(cat "$tmp/err")"
                continue
            fi
            line=$("$cli" inspect "$out" | sed -n 's/^quantization: //p')
            case "$line" in "$fmt ("*) ;; *) bad "inspect names $fmt for --format $fmt --scheme $scheme: '$line'" ;; esac
            "$cli" dequantize "$out" "$tmp/d.safetensors" --force --json >"$tmp/d.json" 2>"$tmp/err" &&
                grep -q "\"convention\":\"$fmt\"" "$tmp/d.json" ||
                bad "dequantize of --format $fmt --scheme $scheme: $(cat "$tmp/d.json" "$tmp/err")"
        done
    done
fi
[ "$fail" = 0 ] && echo "test_ckpt_structure: ok" || echo "test_ckpt_structure: $fail failed"
exit $((fail > 0))
