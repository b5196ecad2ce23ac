"""bench_overhead_cpu.py - host time per call of the raw fp8kit.scaled_mm path
on the CPU backend with numpy inputs (no torch or GPU needed): e4m3 x e4m3,
rowwise scales, 16x16x32 on one thread, so the C work is small and the
binding's Python work (argument checks, pointer extraction, struct filling,
plan lookup) dominates. Prints the median of 7 runs of N calls for several
call forms next to the bare C call with the same prepared structs. --torch:
the same for the torch hot path with torch CPU tensors, step by step (each
step of one hot call alone, perf_counter_ns over 10^5 calls, the steps taking
turns in 7 rounds, median), the hot path before and now side by side, and a
cProfile of the whole call (bench_overhead.py --steps runs the same
steps on CUDA).
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


def torch_steps(n=100000, device="cpu", M=16, N=16, K=32, profile=True, rounds=7):
    """Host us of each step of one torch hot call (scaled_mm's inlined body), then whole calls:
    fp8kit.scaled_mm and three copies of its hot path with the same glue - the one before
    fp8kit_gemm_call_ptrs (per-thread args words, torch.empty_strided, fp8kit_gemm_call_run),
    the current one, and the current one with torch.empty_strided - an A/B in one process.
    Each form alone in a loop of n // rounds calls in batches of 200 (synchronized between
    batches on CUDA, outside the timing, so the launch queue never fills); the forms take
    turns within each of `rounds` rounds (every form sees the same machine drift); median
    over rounds. Returns {form: us}."""
    import ctypes
    import struct
    import threading
    import torch
    from fp8kit import _lib
    cuda = device != "cpu"
    qa, sa = fp8kit.quantize(torch.randn(M, K, device=device), scheme="row")
    qw, sw = fp8kit.quantize(torch.randn(N, K, device=device), scheme="row")
    b, sbt, bf16 = qw.t(), sw.t(), torch.bfloat16
    if not cuda:
        fp8kit.get_context(fp8kit.Backend.CPU).set_threads(1)
    for _ in range(3):
        d = fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=bf16)
    h = _gemm._last
    if h is None or len(h) < 12:
        print("no guarded hot entry of this binding (torch without a usable TensorGuards, or an older binding)")
        return {}
    _, guard, _, plan, fn, call, tmpl, d_shape, d_strides, tdtype, tdevice, sidx = h[:12]
    dp, pack7 = torch.Tensor.data_ptr, struct.Struct("7P").pack
    raw = torch._C._cuda_getCurrentRawStream if cuda else (lambda i: 0)
    idx = qa.device.index if cuda else 0
    stream = raw(idx)
    words = pack7(dp(qa), dp(b), dp(sa), dp(sbt), 0, dp(d), stream)  # d stays alive: the C call may write it
    assert fn(call, words) == 0
    like, es, is_comp = torch.empty_like, torch.empty_strided, _gemm._is_compiling
    if tmpl is None:
        tmpl = torch.empty((), dtype=bf16, device=qa.device).expand(M, N)
    # the hot path before fp8kit_gemm_call_ptrs: this thread's args words and call struct
    oargs = fp8kit.GemmArgs.from_buffer_copy(plan.raw)
    owords = (ctypes.c_uint64 * (ctypes.sizeof(oargs) // 8)).from_buffer(oargs)
    ocall = (ctypes.c_uint64 * 4)(plan.ctx.handle, ctypes.addressof(plan.desc), ctypes.addressof(oargs), 0)
    obufs = {threading.get_ident(): (owords, None, None, ocall, ctypes.byref(ocall))}
    orun, ident = _lib.unchecked(plan.ctx._lib, "fp8kit_gemm_call_run"), threading.get_ident

    def old_hot(a, b, scale_a, scale_b):
        if is_comp():
            return None
        if guard(a, b, scale_a, scale_b):
            buf = obufs.get(ident())
            w = buf[0]
            w[0] = dp(a)
            w[10] = dp(b)
            w[20] = dp(scale_a)
            w[30] = dp(scale_b)
            out = es(d_shape, d_strides, dtype=tdtype, device=tdevice)
            w[61] = dp(out)
            if sidx is not None:
                buf[3][3] = raw(sidx)
            if orun(buf[4]):
                raise RuntimeError("fp8kit_gemm_call_run failed")
            return out

    def new_hot(a, b, scale_a, scale_b, strided=False):
        if is_comp():
            return None
        if guard(a, b, scale_a, scale_b):
            out = es(d_shape, d_strides, dtype=tdtype, device=tdevice) if strided else like(tmpl)
            if fn(call, pack7(dp(a), dp(b), dp(scale_a), dp(scale_b), 0, dp(out),
                              0 if sidx is None else raw(sidx))):
                raise RuntimeError("fp8kit_gemm_call_ptrs failed")
            return out

    want = fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=bf16, alpha=1.0)  # the general path
    for f in (old_hot, new_hot):
        assert torch.equal(f(qa, b, sa, sbt).view(torch.int16), want.view(torch.int16))

    def pointers():
        return dp(qa), dp(b), dp(sa), dp(sbt), dp(d), dp(d)

    def unpack():
        _, _, _, _, _, _, _, _, _ = h[3:12]

    steps = [
        ("(empty loop)", lambda: None),
        ("is_compiling()", is_comp),
        ("guard check of 4 operands (TensorGuards)", lambda: guard(qa, b, sa, sbt)),
        ("entry unpack (12 fields)", unpack),
        ("torch.empty_like(expanded template) (D, now)", lambda: like(tmpl)),
        ("torch.empty_strided(shape, strides, dtype=, device=) (D, before)",
         lambda: es((M, N), (N, 1), dtype=bf16, device=qa.device)),
        ("6 data_ptr()", pointers),
        ("current raw stream", lambda: raw(idx)),
        ("struct pack of the 7 words", lambda: pack7(1, 2, 3, 4, 0, 6, stream)),
        ("C call fp8kit_gemm_call_ptrs(call, words) (%s %dx%dx%d GEMM)" % (device, M, N, K), lambda: fn(call, words)),
        ("whole call: hot path before (words + empty_strided + fp8kit_gemm_call_run)",
         lambda: old_hot(qa, b, sa, sbt)),
        ("whole call: hot path now (empty_like + pack + fp8kit_gemm_call_ptrs)", lambda: new_hot(qa, b, sa, sbt)),
        ("whole call: hot path now with empty_strided", lambda: new_hot(qa, b, sa, sbt, True)),
        ("whole fp8kit.scaled_mm", lambda: fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=bf16)),
    ]
    pc = time.perf_counter_ns
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    batch = 200
    nb = max(1, n // rounds // batch)
    times = {name: [] for name, _ in steps}
    for name, f in steps:
        for _ in range(batch):
            f()
    for r in range(rounds):
        for name, f in steps:
            tot = 0
            for _ in range(nb):
                sync()
                t0 = pc()
                for _ in range(batch):
                    f()
                tot += pc() - t0
            times[name].append(tot / (nb * batch) / 1e3)
    sync()
    res = {name: sorted(v)[len(v) // 2] for name, v in times.items()}
    loop = res["(empty loop)"]
    print("| step of a torch hot call (torch %s, %s tensors, %dx%dx%d; median of %d rounds of %d calls) | us | "
          "minus the empty loop |\n|---|---|---|" % (torch.__version__, device, M, N, K, rounds, nb * batch))
    for name, _ in steps:
        print("| %s | %.3f | %.3f |" % (name, res[name], res[name] - loop))
    if profile:
        import cProfile
        import pstats
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(n // 10):
            fp8kit.scaled_mm(qa, b, sa, sbt, out_dtype=bf16)
        pr.disable()
        sync()
        pstats.Stats(pr).sort_stats("tottime").print_stats(8)
    return res


if __name__ == "__main__":
    if "--torch" in sys.argv:
        torch_steps()
    else:
        main()
