#!/usr/bin/env python3
"""mx_peer.py - the MXFP8 GEMM on the GPU against what a user would do instead, same process.

Dense rows: for each shape (M, N, K), with A (M, K) and B (N, K) drawn from bf16 normals and
quantized by fp8kit.quantize(..., "mx") (e4m3, e8m0 scales per 32 of K):
  ours      fp8kit.scaled_mm(a, b.t(), sa, sb, scale_mode="mx") -> bf16 (the call gets the
            workspace the library asks for, so it runs on the normalized copies: docs/spec.md 3)
  peer      "dequant+bf16": fp8kit.dequantize of A and B to bf16, then torch.mm (what the
            issue calls the user's alternative; all three steps timed together)
  tensor    our tensor-scaled fp8 GEMM on the same shape (fp8kit.quantize "tensor"), for the
            "within 15% of tensor-scaled" target
Grouped rows (the mixture-of-experts case): for each grouped shape (G, T, N, K), A (T, K) holds
the T tokens grouped by expert (offs = the G int32 row ends on the device, split evenly or, with
--split uneven / both, skewed: expert g's share proportional to 1/(g+1)), W (G, N, K) the expert
weights, quantized "mx" (A's scales (T, K/32), W's (G, N, K/32)):
  ours      fp8kit.grouped_mm(a, w.transpose(1, 2), offs, sa, sw) -> bf16, with the workspace the
            library asks for (fp8kit._grouped.grouped_mm_workspace_size) allocated once, outside
            the timed calls, and passed as workspace= (so, unlike the dense rows, no allocation
            is timed; the dense scaled_mm has no workspace argument)
  peer      "dequant+bf16": fp8kit.dequantize of A and of W to bf16, then torch._grouped_mm(A,
            W^T, offs) (peer_impl "torch._grouped_mm"); where this torch has none or refuses
            the case, one torch.mm per expert on host-known offsets (peer_impl "per-expert
            torch.mm loop", printed as such)
  tensor    our tensor-scaled grouped fp8 GEMM (fp8kit.grouped_mm with a's tensor scale and one
            scale per expert) on the same shape and offsets
Times are medians of CUDA-event timings over --reps calls after --warmup calls. Each ours
result is checked against the peer's (relative Frobenius error, printed; rows past the last
offset are not compared). One JSON line per shape to --json (op "gemm_mx" / "grouped_gemm_mx",
peer_name "dequant+bf16"; tensor_us beside it; grouped rows add G, T, N, K, split, offsets,
peer_impl and workspace_bytes).

Usage: python3 bench/mx_peer.py [--json FILE] [--shapes 8192x8192x8192,...|none] [--reps 20]
         [--grouped-shapes GxTxNxK,...|none] [--split even|uneven|both] [--tuning SPEC]
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
GROUPED_SHAPES = [(8, 8192, 4096, 7168)]  # (G experts, T tokens in all, N, K)


def parse_shapes(spec, dims):
    """'AxBxC,...' -> [(A, B, C), ...] with `dims` numbers each; 'none' or '' -> []."""
    if spec is None:
        return None
    if spec.strip().lower() in ("", "none"):
        return []
    out = []
    for s in spec.split(","):
        v = tuple(int(x) for x in s.lower().split("x"))
        if len(v) != dims or min(v) <= 0:
            raise SystemExit("mx_peer.py: shape %r: expected %d positive numbers joined by 'x'" % (s, dims))
        out.append(v)
    return out


def split_rows(T, G, how):
    """The G expert row counts of T tokens: 'even' (T/G each, the first T % G experts one more) or
    'uneven' (expert g's share proportional to 1/(g+1), rounded; the last takes the remainder)."""
    if how == "even":
        return [T // G + (1 if g < T % G else 0) for g in range(G)]
    w = [1.0 / (g + 1) for g in range(G)]
    sizes = [int(T * x / sum(w)) for x in w[:-1]]
    return sizes + [T - sum(sizes)]


def row_ends(sizes):
    ends, acc = [], 0
    for n in sizes:
        acc += n
        ends.append(acc)
    return ends


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


def grouped_peer(T, offs, bounds):
    """(function of (bf16 A, bf16 W (G, N, K)) -> (T, N), peer_impl): torch._grouped_mm where this torch
    has it (checked by the caller's first call), else one torch.mm per expert on the host-known bounds."""
    gmm = getattr(torch, "_grouped_mm", None)

    def grouped(xa, wb):
        return gmm(xa, wb.transpose(-2, -1), offs=offs)

    def loop(xa, wb):
        out = torch.empty(T, wb.shape[1], device=xa.device, dtype=torch.bfloat16)
        for g, (r0, r1) in enumerate(bounds):
            if r1 > r0:
                torch.mm(xa[r0:r1], wb[g].t(), out=out[r0:r1])
        return out
    return (grouped, "torch._grouped_mm (torch %s)" % torch.__version__) if gmm is not None else \
        (loop, "per-expert torch.mm loop (torch %s has no torch._grouped_mm)" % torch.__version__), loop


def grouped_rows(shapes, splits, args, dev, commit):
    """The grouped MX rows (see the module docstring): printed, returned as JSON dicts."""
    from fp8kit._grouped import grouped_mm_workspace_size
    rows = []
    for G, T, n, k in shapes:
        x = torch.randn(T, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(G, n, k, device="cuda", dtype=torch.bfloat16)
        qa, sa = fp8kit.quantize(x, "mx")
        qw, sw = fp8kit.quantize(w, "mx")  # sw: (G, N, K/32), each expert's (N, K/32)
        b = qw.transpose(1, 2)  # (G, K, N), K contiguous
        ta, tsa = fp8kit.quantize(x, "tensor")
        tq = [fp8kit.quantize(w[g], "tensor") for g in range(G)]
        tb = torch.stack([q.view(torch.uint8) for q, _ in tq]).view(qw.dtype).transpose(1, 2)
        tsb = torch.stack([s.reshape(()) for _, s in tq]).float()  # (G,): one scale per expert
        d = torch.empty(T, n, device="cuda", dtype=torch.bfloat16)
        dt = torch.empty(T, n, device="cuda", dtype=torch.bfloat16)
        nws = grouped_mm_workspace_size(qa, b, sa, sw, out_dtype=torch.bfloat16)
        ws = torch.empty(nws, device="cuda", dtype=torch.uint8)  # once, outside the timed calls
        for split in splits:
            sizes = split_rows(T, G, split)
            ends = row_ends(sizes)
            bounds = list(zip([0] + ends[:-1], ends))
            offs = torch.tensor(ends, device="cuda", dtype=torch.int32)

            def ours():
                return fp8kit.grouped_mm(qa, b, offs, sa, sw, out_dtype=torch.bfloat16, out=d, workspace=ws)

            (mm, impl), loop = grouped_peer(T, offs, bounds)

            def peer():
                xa = fp8kit.dequantize(qa, sa, "mx", out_dtype="bfloat16")
                wb = fp8kit.dequantize(qw, sw, "mx", out_dtype="bfloat16")
                return mm(xa, wb)

            def tensor():
                return fp8kit.grouped_mm(ta, tb, offs, tsa, tsb, out_dtype=torch.bfloat16, out=dt)

            got = ours().clone()
            try:
                want = peer()
            except (RuntimeError, NotImplementedError) as e:  # this torch refuses the case: the loop
                print("  torch._grouped_mm failed (%s): timing the per-expert torch.mm loop instead"
                      % str(e).splitlines()[0], flush=True)
                mm, impl = loop, "per-expert torch.mm loop (torch %s: torch._grouped_mm failed)" % torch.__version__
                want = peer()
            err = rel(got, want)
            us = timed(ours, args.reps, args.warmup)
            tuned = {}
            for spec in args.tuning:
                cx = fp8kit.Context("cuda")
                cx.set_tuning(spec)
                wst = torch.empty(grouped_mm_workspace_size(qa, b, sa, sw, out_dtype=torch.bfloat16, ctx=cx),
                                  device="cuda", dtype=torch.uint8)
                tuned[spec] = timed(lambda cx=cx, wst=wst: fp8kit.grouped_mm(
                    qa, b, offs, sa, sw, out_dtype=torch.bfloat16, out=d, workspace=wst, ctx=cx),
                    args.reps, args.warmup)
            pus = timed(peer, args.reps, args.warmup)
            tus = timed(tensor, args.reps, args.warmup)
            flops = 2.0 * T * n * k
            short = "torch._grouped_mm" if impl.startswith("torch._grouped_mm") else "per-expert torch.mm"
            line = ("grouped_gemm_mx G%d T%d %5dx%5d %-6s  ours %8.1f us (%6.1f TFLOP/s)  dequant+bf16[%s] %8.1f us  "
                    "ratio %.3f  tensor-scaled %8.1f us (mx/tensor %.3f)  rel vs peer %.2e  workspace %d B" %
                    (G, T, n, k, split, us, flops / us * 1e-6, short, pus, pus / us, tus, tus / us, err, nws))
            for spec, t in tuned.items():
                line += "\n        tuning %s: %8.1f us (%6.1f TFLOP/s, ratio %.3f)" % (spec, t, flops / t * 1e-6,
                                                                                        pus / t)
            print(line, flush=True)
            rows.append(dict(op="grouped_gemm_mx", case="G%dxT%dxN%dxK%d-%s" % (G, T, n, k, split),
                             shape=[G, T, n, k], G=G, T=T, N=n, K=k, split=split, offsets=ends, ours=round(us, 2),
                             peer=round(pus, 2), peer_name="dequant+bf16", peer_impl=impl, ratio=round(pus / us, 4),
                             tensor_us=round(tus, 2), tensor_ratio=round(tus / us, 4),
                             tflops=round(flops / us * 1e-6, 1), rel_vs_peer=err, unit="us", device=dev,
                             tuned_us={k: round(v, 2) for k, v in tuned.items()}, workspace_bytes=nws,
                             date=datetime.date.today().isoformat(), commit=commit))
        del x, w, qa, sa, qw, sw, b, ta, tsa, tq, tb, tsb, d, dt, ws
        torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--shapes", default=None, help="dense MxNxK,... ('none': no dense rows)")
    ap.add_argument("--grouped-shapes", default=None,
                    help="grouped GxTxNxK,... (G experts, T tokens in all; default 8x8192x4096x7168; 'none': no "
                         "grouped rows)")
    ap.add_argument("--split", choices=("even", "uneven", "both"), default="even",
                    help="how the T tokens are split over the experts (uneven: expert g's share ~ 1/(g+1))")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--tuning", action="append", default=[],
                    help="also time ours on a context with these tuning overrides (docs/tuning.md), e.g. gemm_bn=192")
    args = ap.parse_args()
    shapes = parse_shapes(args.shapes, 3)
    if shapes is None:
        shapes = SHAPES
    gshapes = parse_shapes(args.grouped_shapes, 4)
    if gshapes is None:
        gshapes = GROUPED_SHAPES
    splits = ["even", "uneven"] if args.split == "both" else [args.split]
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
    rows += grouped_rows(gshapes, splits, args, dev, commit)
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
