"""bench_overhead_cpu.py - host time per call of the raw fp8kit.scaled_mm path
on the CPU backend with numpy inputs (no torch or GPU needed): e4m3 x e4m3,
rowwise scales, 16x16x32 on one thread, so the C work is small and the
binding's Python work (argument checks, pointer extraction, struct filling,
plan lookup) dominates. Prints the median of 7 runs of N calls for several
call forms next to the bare C call with the same prepared structs. --torch:
the same for the torch hot path with torch CPU tensors, step by step (each
step of one hot call alone, perf_counter_ns over 10^5 calls, median of 5)
and a cProfile of the whole call.
Run: FP8KIT_LIBRARY=build/libfp8kit.so python3 python/bench_overhead_cpu.py [--profile] [--torch]"""
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


def torch_steps(n=100000):
    """Host us of each step of one torch hot call (scaled_mm's inlined body), then the whole call."""
    import threading
    import torch
    M, N, K = 16, 16, 32
    qa, sa = fp8kit.quantize(torch.randn(M, K), scheme="row")
    qw, sw = fp8kit.quantize(torch.randn(N, K), scheme="row")
    b, sbt, bf16 = qw.t(), sw.t(), torch.bfloat16
    fp8kit.get_context(fp8kit.Backend.CPU).set_threads(1)
    for _ in range(3):
        d = fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=bf16)
    h = _gemm._last
    if h is None:
        print("no guarded hot entry (torch without a usable TensorGuards)")
        return
    buf = h[5][threading.get_ident()]
    words, fn, dev, dp, ident = buf[0], h[4], qa.device, torch.Tensor.data_ptr, threading.get_ident
    def pointers():  # statements, as in the hot call (a lambda with __setitem__ costs more)
        words[0] = dp(qa)
        words[10] = dp(b)
        words[20] = dp(sa)
        words[30] = dp(sbt)

    def d_pointer():
        words[61] = dp(d)

    steps = [
        ("(empty loop)", lambda: None),
        ("is_compiling()", _gemm._is_compiling),
        ("guard check of 4 operands", lambda: h[1](qa, b, sa, sbt)),
        ("entry unpack", lambda: h[3:11]),
        ("this thread's buffer", lambda: h[5].get(ident())),
        ("4 data_ptr() + word writes", pointers),
        ("torch.empty_strided", lambda: torch.empty_strided((M, N), (N, 1), dtype=bf16, device=dev)),
        ("D's data_ptr() + word write", d_pointer),
        ("C call fp8kit_gemm_call_run (a %dx%dx%d CPU GEMM)" % (M, N, K), lambda: fn(buf[4])),
        ("whole fp8kit.scaled_mm", lambda: fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=bf16)),
    ]
    pc = time.perf_counter_ns
    res = {}
    for name, f in steps:
        ts = []
        for _ in range(5):
            t0 = pc()
            for _ in range(n):
                f()
            ts.append((pc() - t0) / n / 1e3)
        res[name] = sorted(ts)[2]
    loop = res["(empty loop)"]
    print("| step of a torch hot call (torch %s CPU tensors) | us | minus the empty loop |\n|---|---|---|"
          % torch.__version__)
    for name, _ in steps:
        print("| %s | %.3f | %.3f |" % (name, res[name], res[name] - loop))
    import cProfile
    import pstats
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=bf16)
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(8)


if __name__ == "__main__":
    if "--torch" in sys.argv:
        torch_steps()
    else:
        main()
