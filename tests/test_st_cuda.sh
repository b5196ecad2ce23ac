#!/usr/bin/env bash
# test_st_cuda.sh - CTest test (registered in CMakeLists.txt; by hand:
# tests/test_st_cuda.sh build/fp8kit): checkpoint conversion on the CUDA
# backend gives the same bytes as on the CPU backend. A small model directory
# (written by python3's standard library alone: BF16 / F32 / F16 weights,
# config.json, tokenizer.json) is quantized with every scheme x format, and
# dequantized back, once with --backend cuda and once with --backend cpu, by
# the CLI and by the Python API (fp8kit.quantize_checkpoint(device="cuda"));
# every pair of outputs must be equal byte for byte (directory trees compared
# file by file). Skips (77) without a usable GPU or without safetensors support.
set -u
cli="${1:-build/fp8kit}"
here="$(cd "$(dirname "$0")/.." && pwd)"
command -v python3 >/dev/null || { echo "test_st_cuda: no python3, skipped"; exit 77; }
"$cli" info --json 2>/dev/null | grep '"cuda":{[^}]*"available":true' >/dev/null ||
    { echo "test_st_cuda: no usable CUDA device, skipped"; exit 77; }
"$cli" inspect --help >/dev/null 2>&1 || { echo "test_st_cuda: no safetensors support, skipped"; exit 77; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

python3 - "$tmp/model" <<'EOF' || { echo "test_st_cuda: could not write the model"; exit 1; }
import json, os, random, struct, sys
d = sys.argv[1]
os.makedirs(d)
rnd = random.Random(7)
def tensor(dt, shape):
    n = 1
    for s in shape:
        n *= s
    vals = [rnd.gauss(0, 1) * (1000.0 if i % 97 == 0 else 1.0) for i in range(n)]
    if dt == "F32":
        return struct.pack("<%df" % n, *vals)
    if dt == "F16":
        return struct.pack("<%de" % n, *vals)
    return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:] for v in vals)  # BF16
ts = [("model.embed_tokens.weight", "BF16", [96, 256]),
      ("model.layers.0.self_attn.q_proj.weight", "BF16", [256, 256]),
      ("model.layers.0.mlp.up_proj.weight", "F32", [384, 256]),
      ("model.layers.0.mlp.down_proj.weight", "F16", [256, 384]),
      ("model.layers.0.mlp.odd_proj.weight", "BF16", [200, 160]),
      ("model.norm.weight", "F32", [256]),
      ("lm_head.weight", "BF16", [96, 256])]
header, blobs, off = {}, [], 0
for name, dt, shape in ts:
    b = tensor(dt, shape)
    header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
json.dump({"architectures": ["LlamaForCausalLM"], "hidden_size": 256, "rms_norm_eps": 1e-05},
          open(os.path.join(d, "config.json"), "w"), indent=2)
open(os.path.join(d, "tokenizer.json"), "w").write('{"version": "1.0"}')
EOF

same_tree() { diff -r "$1" "$2" >/dev/null 2>&1; }

for scheme in fp8-tensor fp8-row fp8-block mxfp8; do
    for format in fp8 compressed-tensors; do
        [ "$scheme/$format" = fp8-row/fp8 ] && continue
        tag="$scheme-$format"
        for be in cpu cuda; do
            "$cli" quantize "$tmp/model" "$tmp/q-$tag-$be" --scheme "$scheme" --format "$format" --backend "$be" \
                --no-fsync --quiet 2>"$tmp/err" || bad "quantize $tag --backend $be: $(head -c 300 "$tmp/err")"
            "$cli" dequantize "$tmp/q-$tag-$be" "$tmp/d-$tag-$be" --backend "$be" --no-fsync --quiet 2>"$tmp/err" ||
                bad "dequantize $tag --backend $be: $(head -c 300 "$tmp/err")"
        done
        if same_tree "$tmp/q-$tag-cpu" "$tmp/q-$tag-cuda"; then ok; else bad "quantize $tag: CUDA and CPU outputs differ"; fi
        if same_tree "$tmp/d-$tag-cpu" "$tmp/d-$tag-cuda"; then ok; else bad "dequantize $tag: CUDA and CPU outputs differ"; fi
    done
done

# The Python API on a CUDA context (staging through device memory in the library)
lib="$(dirname "$cli")/libfp8kit.so"
if [ -e "$lib" ] && python3 -c 'import numpy' 2>/dev/null; then
    if FP8KIT_LIBRARY="$lib" PYTHONPATH="$here/python" python3 - "$tmp" <<'EOF'
import filecmp, sys
import fp8kit
t = sys.argv[1]
bad = 0
for scheme, fmt in [("block", "fp8"), ("mx", "compressed-tensors"), ("row", None), ("tensor", "fp8")]:
    a, b = "%s/py-%s-%s-cpu" % (t, scheme, fmt), "%s/py-%s-%s-cuda" % (t, scheme, fmt)
    fp8kit.quantize_checkpoint(t + "/model", a, scheme=scheme, format=fmt, device="cpu")
    fp8kit.quantize_checkpoint(t + "/model", b, scheme=scheme, format=fmt, device="cuda")
    c = filecmp.dircmp(a, b)
    _, mismatch, errors = filecmp.cmpfiles(a, b, c.common_files, shallow=False)
    if mismatch or errors or c.left_only or c.right_only:
        print("FAIL: python quantize_checkpoint %s/%s: CUDA and CPU differ: %s" % (scheme, fmt, mismatch + errors))
        bad += 1
    fp8kit.dequantize_checkpoint(b, b + "-deq", device="cuda")
    fp8kit.dequantize_checkpoint(a, a + "-deq", device="cpu")
    if not filecmp.cmp(a + "-deq/model.safetensors", b + "-deq/model.safetensors", shallow=False):
        print("FAIL: python dequantize_checkpoint %s/%s differs" % (scheme, fmt))
        bad += 1
sys.exit(1 if bad else 0)
EOF
    then ok; else bad "Python quantize_checkpoint / dequantize_checkpoint on CUDA"; fi
fi

echo "test_st_cuda: $pass passed, $fail failed"
[ "$fail" = 0 ]
