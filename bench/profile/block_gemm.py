#!/usr/bin/env python3
"""block_gemm.py - a launch target for profilers: fp8kit's dense block-scaled GEMM (e4m3, A 1x128
scales MN-major, so the staged variants run; B 128x128; bf16 out) at one shape, --calls times, with
the context's tuning from FP8KIT_TUNING. Random data; no check (the tests and deepgemm_peer.py check).
--time: also the median of 20 timed calls (CUDA events, L2 flushed before each), for quick A/B of tunings
in separate processes (figures for the record come from deepgemm_peer.py, beside DeepGEMM).
Usage (on the GPU machine): FP8KIT_TUNING=gemm_bm=256 ncu ... python3 bench/profile/block_gemm.py 8192x8192x8192"""
import argparse

import torch

import fp8kit as fk

ap = argparse.ArgumentParser()
ap.add_argument("shape", help="MxNxK")
ap.add_argument("--calls", type=int, default=4)
ap.add_argument("--time", action="store_true")
args = ap.parse_args()
m, n, k = (int(v) for v in args.shape.split("x"))
dev = torch.device("cuda")
a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn)
kb = (k + 127) // 128
sa = torch.zeros(kb, 4 * ((m + 3) // 4), device=dev)
sa[:, :m] = torch.rand(kb, m, device=dev) + 0.5
sb = torch.rand((n + 127) // 128, kb, device=dev) + 0.5
d = torch.empty(m, n, dtype=torch.bfloat16, device=dev)
for _ in range(args.calls):
    fk.scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, out=d, scale_mode="block", scale_layout="mn_major")
torch.cuda.synchronize()
print("block_gemm: %d calls of %s done" % (args.calls, args.shape))
if args.time:
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    ts = []
    for _ in range(20):
        flush.zero_()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fk.scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16, out=d, scale_mode="block", scale_layout="mn_major")
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e3)
    us = sorted(ts)[len(ts) // 2]
    print("block_gemm %s: %.1f us, %.0f TFLOP/s" % (args.shape, us, 2.0 * m * n * k / us * 1e-6))
