#!/usr/bin/env python3
"""k_grouped_probe.py - where the K-grouped GEMM's time goes: fp8kit.k_grouped_mm on one
shape (default DeepGEMM's weight-gradient case: 4 groups, M 4096, N 7168, K 34304) in variants
that drop one cost at a time - D += (beta 1, fp32) against D = (beta 0) and bf16 output, 1x128
scales against tensor scales - beside the dense row-scaled GEMM of the same FLOPs (one group
of K 34304), each under a list of tunings, all in one process (CUDA, torch).

Usage: python3 bench/k_grouped_probe.py [--m 4096] [--n 7168] [--ks 8064,9088,7936,9216]
           [--tunings "|gemm_bn=128"] [--reps 20] [--json FILE]
Prints one line per variant and tuning: microseconds, TFLOP/s and the ratio to the first
variant under the same tuning; --json appends the rows (peer_name: the first variant)."""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fp8kit  # noqa: E402


def timed(fn, reps):
    fn()
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    best = None
    for _ in range(3):
        ev[0].record()
        for _ in range(reps):
            fn()
        ev[1].record()
        torch.cuda.synchronize()
        us = ev[0].elapsed_time(ev[1]) * 1000.0 / reps
        best = us if best is None else min(best, us)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--n", type=int, default=7168)
    ap.add_argument("--ks", default="8064,9088,7936,9216", help="the groups' K (multiples of 128)")
    ap.add_argument("--tunings", default="|gemm_bn=128", help="tuning specs separated by '|' ('' = the planner's)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("k_grouped_probe: no CUDA device")
        return 77
    torch.manual_seed(0)
    m, n, ks = a.m, a.n, [int(x) for x in a.ks.split(",")]
    kt, g = sum(ks), len(ks)
    dev = "cuda"
    A = (torch.randn(m, kt, device=dev) * 2).to(torch.float8_e4m3fn)
    B = (torch.randn(n, kt, device=dev) * 2).to(torch.float8_e4m3fn)
    sa = torch.rand(m, (kt + 127) // 128, device=dev) + 0.5
    sb = torch.rand(n, (kt + 127) // 128, device=dev) + 0.5
    ends, s = [], 0
    for k in ks:
        s += k
        ends.append(s)
    offs = torch.tensor(ends, dtype=torch.int32, device=dev)
    d32 = torch.zeros(g, m, n, device=dev)
    d16 = torch.zeros(g, m, n, device=dev, dtype=torch.bfloat16)
    one = torch.ones((), device=dev)
    row_a, row_b = torch.rand(m, 1, device=dev) + 0.5, torch.rand(1, n, device=dev) + 0.5
    dense_out = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    variants = [
        ("f32 D += , 1x128", lambda: fp8kit.k_grouped_mm(A, B, offs, sa, sb, out=d32, beta=1.0, fast_accum=True)),
        ("f32 D = , 1x128", lambda: fp8kit.k_grouped_mm(A, B, offs, sa, sb, out=d32, beta=0.0, fast_accum=True)),
        ("bf16 D = , 1x128", lambda: fp8kit.k_grouped_mm(A, B, offs, sa, sb, out=d16, fast_accum=True)),
        ("f32 D += , tensor", lambda: fp8kit.k_grouped_mm(A, B, offs, one, one, out=d32, beta=1.0, fast_accum=True)),
        ("bf16 D = , tensor", lambda: fp8kit.k_grouped_mm(A, B, offs, one, one, out=d16, fast_accum=True)),
        ("dense row, K total", lambda: fp8kit.scaled_mm(A, B.t(), row_a, row_b, out_dtype=torch.bfloat16,
                                                         out=dense_out, use_fast_accum=True)),
    ]
    flop = 2.0 * m * n * kt
    ctx = fp8kit.get_context("cuda", torch.cuda.current_device())
    for spec in a.tunings.split("|"):
        ctx.set_tuning(spec or None)
        base = None
        for name, fn in variants:
            try:
                us = timed(fn, a.reps)
            except Exception as e:  # noqa: BLE001 - a variant this build cannot run
                print("%-22s %-18s error: %s" % (spec or "default", name, str(e).splitlines()[0][:120]))
                continue
            base = base or us
            print("%-22s %-18s %9.1f us %7.1f TFLOP/s  %.3f of the first" % (spec or "default", name, us,
                                                                          flop / us * 1e-6, us / base))
            if a.json:
                with open(a.json, "a") as f:
                    f.write(json.dumps({"op": "k_grouped_probe", "case": "g%d_m%d_n%d_k%d %s" % (g, m, n, kt, name),
                                        "tuning": spec, "ours_us": round(us, 2), "peer_us": round(base, 2),
                                        "peer_name": "fp8kit f32 D +=, 1x128 (same tuning)",
                                        "ratio": round(base / us, 3),
                                        "device": torch.cuda.get_device_name()}) + "\n")
    ctx.set_tuning(None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
