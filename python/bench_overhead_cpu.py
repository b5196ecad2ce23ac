"""bench_overhead_cpu.py - host time per call of the raw fp8kit.scaled_mm path
on the CPU backend with numpy inputs (no torch or GPU needed): e4m3 x e4m3,
rowwise scales, 16x16x32 on one thread, so the C work is small and the
binding's Python work (argument checks, pointer extraction, struct filling,
plan lookup) dominates. Prints the median of 7 runs of N calls for several
call forms next to the bare C call with the same prepared structs.
Run: FP8KIT_LIBRARY=build/libfp8kit.so python3 python/bench_overhead_cpu.py [--profile]"""
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import fp8kit  # noqa: E402
from fp8kit import _gemm  # noqa: E402


def median_us(f, n=5000, reps=7):
    for _ in range(300):
        f()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        ts.append((time.perf_counter() - t0) / n * 1e6)
    return sorted(ts)[reps // 2]


def main():
    rng = np.random.default_rng(0)
    M = N = 16
    K = 32
    qa, sa = fp8kit.quantize(rng.standard_normal((M, K)).astype(np.float32), scheme="row")
    qw, sw = fp8kit.quantize(rng.standard_normal((N, K)).astype(np.float32), scheme="row")
    b, sbt = qw.T, sw.T
    ctx = fp8kit.get_context(fp8kit.Backend.CPU)
    ctx.set_threads(1)
    out = np.empty((M, N), np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    forms = [
        ("scaled_mm(a, b, sa, sb)", lambda: fp8kit.scaled_mm(qa, b, sa, sbt)),
        ("scaled_mm(a, b, sa, sb, out_dtype='bfloat16')", lambda: fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype="bfloat16")),
        ("scaled_mm(..., bias=bias, activation='relu')",
         lambda: fp8kit.scaled_mm(qa, b, sa, sbt, bias=bias, activation="relu")),
        ("scaled_mm(..., ctx=ctx)", lambda: fp8kit.scaled_mm(qa, b, sa, sbt, ctx=ctx)),
        ("scaled_mm(..., out=out)", lambda: fp8kit.scaled_mm(qa, b, sa, sbt, out=out)),
    ]
    fp8kit.scaled_mm(qa, b, sa, sbt, out=out)
    plan = next(p for p in _gemm._plans.values() if p.ctx is ctx)
    args = fp8kit.GemmArgs.from_buffer_copy(plan.raw)
    args.a.data, args.b.data = qa.ctypes.data, qw.ctypes.data
    args.scale_a.data, args.scale_b.data, args.d.data = sa.ctypes.data, sw.ctypes.data, out.ctypes.data
    fn, h, pd, pa = ctx._lib.fp8kit_gemm, ctx.handle, ctypes.byref(plan.desc), ctypes.byref(args)
    assert fn(h, pd, pa, None) == 0
    assert np.array_equal(out, fp8kit.scaled_mm(qa, b, sa, sbt))
    bare = median_us(lambda: fn(h, pd, pa, None))
    print("fp8kit raw scaled_mm %dx%dx%d on the CPU backend (1 thread), numpy inputs, row scales" % (M, N, K))
    print("| call | us per call | minus bare C call |")
    print("|---|---|---|")
    for name, f in forms:
        us = median_us(f)
        print("| %s | %.2f | %.2f |" % (name, us, us - bare))
    print("| bare C fp8kit_gemm (prepared structs) | %.2f | 0 |" % bare)
    if "--profile" in sys.argv:
        import cProfile
        import pstats
        f = forms[0][1]
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(20000):
            f()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
