#!/usr/bin/env python3
"""mx_peer.py - the MXFP8 GEMM on the GPU against what a user would do instead, same process.

For each shape (M, N, K), with A (M, K) and B (N, K) drawn from bf16 normals and
quantized by fp8kit.quantize(..., "mx") (e4m3, e8m0 scales per 32 of K):
  ours      fp8kit.scaled_mm(a, b.t(), sa, sb, scale_mode="mx") -> bf16 (the call gets the
            workspace the library asks for, so it runs on the normalized copies: docs/spec.md 3)
  peer      "dequant+bf16": fp8kit.dequantize of A and B to bf16, then torch.mm (what the
            issue calls the user's alternative; all three steps timed together)
  tensor    our tensor-scaled fp8 GEMM on the same shape (fp8kit.quantize "tensor"), for the
            "within 15% of tensor-scaled" target
Times are medians of CUDA-event timings over --reps calls after --warmup calls. Each ours
result is checked against the peer's (relative Frobenius error, printed). One JSON line per
shape to --json (op "gemm_mx", peer_name "dequant+bf16"; tensor_us beside it).

Usage: python3 bench/mx_peer.py [--json FILE] [--shapes 8192x8192x8192,...] [--reps 20]
"""
import argparse
import datetime
import json
import os
import pathlib
import sys

import torch

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))
import fp8kit  # noqa: E402

SHAPES = [(8192, 8192, 8192), (4096, 7168, 16384), (2048, 14336, 4096)]


def timed(fn, reps, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1000.0)
    ts.sort()
    return ts[len(ts) // 2]


def rel(x, y):
    x, y = x.float(), y.float()
    return (torch.linalg.vector_norm(x - y) / torch.linalg.vector_norm(y)).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--shapes", default=None)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--tuning", action="append", default=[],
                    help="also time ours on a context with these tuning overrides (docs/tuning.md), e.g. gemm_bn=192")
    args = ap.parse_args()
    shapes = SHAPES
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    dev = torch.cuda.get_device_name()
    commit = os.environ.get("FK_COMMIT", "unknown")
    rows = []
    torch.manual_seed(0)
    for m, n, k in shapes:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        qa, sa = fp8kit.quantize(x, "mx")
        qb, sb = fp8kit.quantize(w, "mx")
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

        def ours():
            return fp8kit.scaled_mm(qa, qb.t(), sa, sb, out_dtype=torch.bfloat16, out=d, scale_mode="mx")

        def peer():
            xa = fp8kit.dequantize(qa, sa, "mx", out_dtype="bfloat16")
            wb = fp8kit.dequantize(qb, sb, "mx", out_dtype="bfloat16")
            return torch.mm(xa, wb.t())

        ta, tsa = fp8kit.quantize(x, "tensor")
        tb, tsb = fp8kit.quantize(w, "tensor")
        dt = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

        def tensor():
            return fp8kit.scaled_mm(ta, tb.t(), tsa, tsb, out_dtype=torch.bfloat16, out=dt)

        err = rel(ours(), peer())
        us = timed(ours, args.reps, args.warmup)
        tuned = {}
        for spec in args.tuning:
            cx = fp8kit.Context("cuda")
            cx.set_tuning(spec)
            tuned[spec] = timed(lambda cx=cx: fp8kit.scaled_mm(qa, qb.t(), sa, sb, out_dtype=torch.bfloat16, out=d,
                                                                scale_mode="mx", ctx=cx), args.reps, args.warmup)
        pus = timed(peer, args.reps, args.warmup)
        tus = timed(tensor, args.reps, args.warmup)
        flops = 2.0 * m * n * k
        line = ("gemm_mx %5dx%5dx%5d  ours %8.1f us (%6.1f TFLOP/s)  dequant+bf16 %8.1f us  ratio %.3f  "
                "tensor-scaled %8.1f us (mx/tensor %.3f)  rel vs peer %.2e" %
                (m, n, k, us, flops / us * 1e-6, pus, pus / us, tus, tus / us, err))
        for spec, t in tuned.items():
            line += "\n        tuning %s: %8.1f us (%6.1f TFLOP/s, ratio %.3f)" % (spec, t, flops / t * 1e-6, pus / t)
        print(line, flush=True)
        rows.append(dict(op="gemm_mx", case="%dx%dx%d" % (m, n, k), shape=[m, n, k], ours=round(us, 2),
                         peer=round(pus, 2), peer_name="dequant+bf16", ratio=round(pus / us, 4),
                         tensor_us=round(tus, 2), tensor_ratio=round(tus / us, 4),
                         tflops=round(flops / us * 1e-6, 1), rel_vs_peer=err, unit="us", device=dev,
                         tuned_us={k: round(v, 2) for k, v in tuned.items()},
                         date=datetime.date.today().isoformat(), commit=commit))
        del x, w, qa, sa, qb, sb, d, ta, tb, dt
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
