"""torch_quant_peer.py - PyTorch peers for bench_quant, measured on the same
GPU in the same device run: a device-to-device copy, the plain cast
x.to(torch.float8_e4m3fn), per-tensor quantization (amax, scale, cast), and a
torch.compile'd MXFP8 reference (OCP floor rule, e4m3) along the last dim
(dim0) and along the second to last (dim1, transposed output like fp8kit's
axis -2). Bandwidth counts the same bytes as bench_quant: 2 B in per bf16
element + 1 B out + scale bytes; the copy counts read + write. Median of 30
CUDA-event timings after warm-up, L2 flushed before each.
Usage: python3 bench/torch_quant_peer.py [out.jsonl]   (env FK_COMMIT, FK_DATE)"""
import json
import sys

import torch

from torch_peer_timing import COMMIT, DATE, DEV, timed  # bench/ is sys.path[0]


def mx_floor(x):
    """OCP MX v1.0 floor rule on 32-blocks of the last dim, e4m3."""
    shp = x.shape
    xb = x.float().reshape(-1, 32)
    amax = xb.abs().amax(dim=1, keepdim=True)
    e = ((amax.view(torch.int32) >> 23) & 0xFF) - 127 - 8
    e = e.clamp(-127, 128)
    s = (e + 127).to(torch.uint8)
    r = torch.exp2((-e).float())
    q = (xb * r).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q.reshape(shp), s.reshape(shp[0], shp[1] // 32)


def main():
    out = open(sys.argv[1], "a") if len(sys.argv) > 1 else None

    def emit(case, shape, tbs, copy):
        rec = dict(op="quantize", case=case, shape=shape, ours=round(tbs, 4), peer=round(copy, 4),
                   peer_name="torch copy_ (read+write)", ratio=round(tbs / copy, 4), unit="TB/s",
                   impl="torch " + torch.__version__, device=DEV, date=DATE, commit=COMMIT)
        line = json.dumps(rec)
        print(line)
        if out:
            out.write(line + "\n")
            out.flush()

    comp0 = torch.compile(mx_floor, dynamic=False)
    comp1 = torch.compile(lambda x: mx_floor(x.t()), dynamic=False)

    def per_tensor(x):
        s = x.abs().amax().float() / 448.0
        return (x.float() / s).to(torch.float8_e4m3fn), s

    for (R, C) in [(16384, 8192), (8192, 7168)]:
        shape = f"{R}x{C}"
        x = torch.randn(R, C, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        n = R * C
        ms = timed(lambda: y.copy_(x))
        copy = 4.0 * n / (ms * 1e-3) / 1e12
        print(f"torch copy {shape}: {ms:.3f} ms {copy:.3f} TB/s")
        ms = timed(lambda: x.to(torch.float8_e4m3fn))
        emit("torch_cast_to_e4m3", shape, 3.0 * n / (ms * 1e-3) / 1e12, copy)
        ms = timed(lambda: per_tensor(x))
        emit("torch_tensor_eager", shape, (3.0 * n + 4) / (ms * 1e-3) / 1e12, copy)
        if R == 16384:
            ms = timed(lambda: comp0(x))
            emit("torch_compile_mx_dim0_floor", shape, (3.0 * n + n / 32) / (ms * 1e-3) / 1e12, copy)
            ms = timed(lambda: comp1(x))
            emit("torch_compile_mx_dim1_floor", shape, (3.0 * n + n / 32) / (ms * 1e-3) / 1e12, copy)
    if out:
        out.close()


if __name__ == "__main__":
    main()
