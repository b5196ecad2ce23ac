#!/usr/bin/env bash
# bench_st.sh - throughput of `fp8kit quantize` / `dequantize` on a synthetic
# bf16 safetensors checkpoint (LLaMA-7B-like layers: 4 x 4096x4096 attention,
# 3 x 11008x4096 MLP, norms; plus a 32000x4096 embedding), about 2 GB,
# generated under /tmp (never in the repo). Peer in the same run: a plain
# copy of the same file (`cp`: read + write through the page cache), and
# `cat > /dev/null` (read only). The input is read once first, so the page
# cache is warm for every run (the machine has enough memory); output goes to
# the same file system as the input. Median of REPS runs.
# Usage: bench/bench_st.sh [FP8KIT_BINARY] [LAYERS] [REPS] [BACKEND] [EXTRA...]
#   defaults: build/fp8kit, 5 layers (2.2 GB), 3 reps, cpu
# Env: FP8KIT_BENCH_DIR (default /tmp/fp8kit-bench-st), KEEP=1 keeps the files.
set -euo pipefail
bin="${1:-build/fp8kit}"
layers="${2:-5}"
reps="${3:-3}"
backend="${4:-cpu}"
shift $(( $# < 4 ? $# : 4 ))
extra=("$@")
dir="${FP8KIT_BENCH_DIR:-/tmp/fp8kit-bench-st}"
mkdir -p "$dir"
in="$dir/model_bf16.safetensors"
if [ ! -f "$in.layers$layers" ]; then
    rm -f "$in" "$in".layers*
    python3 - "$in" "$layers" <<'PY'
import json, struct, sys
import numpy as np
path, layers = sys.argv[1], int(sys.argv[2])
shapes = [("model.embed_tokens.weight", (32000, 4096))]
for l in range(layers):
    p = "model.layers.%d." % l
    shapes += [(p + "input_layernorm.weight", (4096,))]
    shapes += [(p + "self_attn.%s_proj.weight" % n, (4096, 4096)) for n in "qkvo"]
    shapes += [(p + "post_attention_layernorm.weight", (4096,))]
    shapes += [(p + "mlp.gate_proj.weight", (11008, 4096)), (p + "mlp.up_proj.weight", (11008, 4096)),
               (p + "mlp.down_proj.weight", (4096, 11008))]
hdr, off = {"__metadata__": {"format": "pt"}}, 0
for name, shape in shapes:
    n = int(np.prod(shape)) * 2
    hdr[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
    off += n
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
rng = np.random.default_rng(0)
block = (rng.standard_normal(1 << 24).astype(np.float32) * 0.02).view(np.uint32)
block = ((block + 0x7FFF + ((block >> 16) & 1)) >> 16).astype(np.uint16)  # bf16 RNE
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    left, k = off // 2, 0
    while left:
        n = min(left, block.size)
        f.write(np.roll(block, k * 7919)[:n].tobytes())
        left -= n
        k += 1
print("bench_st: wrote %s (%.2f GB, %d tensors)" % (path, (8 + len(h) + off) / 1e9, len(shapes)))
PY
    touch "$in.layers$layers"
fi
size=$(stat -c %s "$in")
cat "$in" > /dev/null # warm the page cache
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
timeit() { # prints seconds of "$@"
    local t0 t1
    t0=$(date +%s.%N); "$@" > /dev/null; t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }'
}
gbs() { awk -v s="$size" -v t="$1" 'BEGIN { printf "%.2f", s / t / 1e9 }'; }
host=$(hostname); cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1); ncpu=$(nproc)
echo "bench_st: $(date -u +%Y-%m-%d) $host, $cpu, $ncpu cores, input $(awk -v s="$size" 'BEGIN { printf "%.2f", s / 1e9 }') GB bf16, backend $backend, median of $reps"
cp_t=$(for i in $(seq "$reps"); do timeit cp "$in" "$dir/copy.safetensors"; rm -f "$dir/copy.safetensors"; done | median)
cat_t=$(for i in $(seq "$reps"); do timeit cat "$in"; done | median)
printf '%-34s %8.3f s %7s GB/s\n' "peer: cp (read + write)" "$cp_t" "$(gbs "$cp_t")"
printf '%-34s %8.3f s %7s GB/s\n' "peer: cat > /dev/null (read)" "$cat_t" "$(gbs "$cat_t")"
out="$dir/out.safetensors"
for scheme in fp8-tensor fp8-row fp8-block mxfp8; do
    t=$(for i in $(seq "$reps"); do
        timeit "$bin" quantize "$in" "$out" --scheme "$scheme" --backend "$backend" --force --quiet "${extra[@]}"
    done | median)
    printf '%-34s %8.3f s %7s GB/s  (%.2fx cp)\n' "quantize $scheme" "$t" "$(gbs "$t")" \
        "$(awk -v a="$cp_t" -v b="$t" 'BEGIN { print a / b }')"
done
"$bin" quantize "$in" "$out" --scheme fp8-block --backend "$backend" --force --quiet "${extra[@]}"
t=$(for i in $(seq "$reps"); do
    timeit "$bin" dequantize "$out" "$dir/deq.safetensors" --backend "$backend" --force --quiet "${extra[@]}"
done | median)
printf '%-34s %8.3f s %7s GB/s of bf16 written\n' "dequantize fp8-block -> bf16" "$t" "$(gbs "$t")"
rm -f "$out" "$dir/deq.safetensors"
if [ "${KEEP:-0}" != 1 ]; then rm -f "$in" "$in".layers*; fi
