"""test_interop.py - inputs other than plain numpy: objects that only speak
DLPack (versioned and legacy capsules, deleters called), ml_dtypes arrays and
torch CPU tensors when those packages are installed (skipped otherwise), and
the host overhead of one raw scaled_mm call on the CPU backend (printed)."""
import ctypes
import gc
import sys
import time

import numpy as np
import pytest

import fp8kit
import spec_ref as ref

F32 = np.float32


class DLPackOnly:
    """Exposes nothing but the DLPack protocol of a numpy array."""

    def __init__(self, arr, legacy=False):
        self._arr, self._legacy = arr, legacy

    def __dlpack__(self, **kwargs):
        if self._legacy:
            if "max_version" in kwargs:
                raise TypeError("legacy producer")
            return self._arr.__dlpack__()
        return self._arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()


@pytest.mark.parametrize("legacy", [False, True])
def test_dlpack_inputs_match_numpy(legacy, rng):
    x = rng.standard_normal((64, 256)).astype(F32)
    q, s = fp8kit.quantize(DLPackOnly(x, legacy), scheme="mx", rounding="rceil")
    rq, rs = ref.quantize(x, "mx", rounding="rceil")
    assert isinstance(q, np.ndarray) and np.array_equal(np.asarray(q), rq) and np.array_equal(np.asarray(s), rs)
    # strided DLPack input (a column slice) and fp8 codes through DLPack (uint8 -> e4m3 by default)
    big = rng.standard_normal((32, 512)).astype(F32)
    q2, s2 = fp8kit.quantize(DLPackOnly(big[:, 64:320], legacy), scheme="row")
    rq2, rs2 = ref.quantize(np.ascontiguousarray(big[:, 64:320]), "row")
    assert np.array_equal(np.asarray(q2), rq2) and np.array_equal(s2, rs2)
    qa, sa = fp8kit.quantize(rng.standard_normal((16, 64)).astype(F32), scheme="row")
    qw, sw = fp8kit.quantize(rng.standard_normal((8, 64)).astype(F32), scheme="row")
    d1 = fp8kit.scaled_mm(qa, qw.T, sa, sw.T)
    d2 = fp8kit.scaled_mm(DLPackOnly(np.asarray(qa), legacy), DLPackOnly(np.asarray(qw).T, legacy),
                          DLPackOnly(sa, legacy), DLPackOnly(sw.T, legacy))
    assert np.array_equal(d1, d2)


@pytest.mark.parametrize("legacy", [False, True])
def test_dlpack_deleter_releases_the_producer(legacy):
    x = np.ones((8, 64), F32)
    gc.collect()
    before = sys.getrefcount(x)
    for _ in range(20):
        fp8kit.quantize(DLPackOnly(x, legacy), scheme="row")
    gc.collect()
    assert sys.getrefcount(x) == before  # every consumed capsule's deleter ran


def test_ml_dtypes_arrays():
    ml = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((32, 128)).astype(F32)
    xb = x.astype(ml.bfloat16)
    q, s = fp8kit.quantize(xb, scheme="mx")
    rq, rs = ref.quantize(xb.astype(F32), "mx")
    assert np.array_equal(np.asarray(q), rq)
    q8 = np.asarray(q).view(ml.float8_e4m3fn)
    s8 = np.asarray(s).view(ml.float8_e8m0fnu)
    y = fp8kit.dequantize(q8, s8, scheme="mx")
    assert np.array_equal(y, fp8kit.dequantize(q, s, scheme="mx"))
    assert np.array_equal(fp8kit.to_float32(q8), q8.astype(F32))


def test_torch_cpu_tensors():
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8 dtypes")
    g = torch.Generator().manual_seed(3)
    a = torch.randn(64, 128, generator=g)
    w = torch.randn(48, 128, generator=g)
    qa, sa = fp8kit.quantize(a, scheme="row")
    qw, sw = fp8kit.quantize(w.to(torch.bfloat16), scheme="row")
    assert qa.dtype == torch.float8_e4m3fn and sa.dtype == torch.float32 and sa.shape == (64, 1)
    rq, rs = ref.quantize(a.numpy(), "row")
    assert np.array_equal(qa.view(torch.uint8).numpy(), rq) and np.array_equal(sa.numpy(), rs)
    d = fp8kit.scaled_mm(qa, qw.t(), sa, sw.t())
    assert d.dtype == torch.bfloat16 and d.shape == (64, 48)
    want = (qa.float().double() * sa.double()) @ (qw.float().double() * sw.double()).t()
    rel = (d.double() - want).norm() / want.norm()
    assert rel.item() <= 4e-3
    if hasattr(torch, "_scaled_mm"):  # torch's own CPU fp8 GEMM, where this build has one
        try:
            t = torch._scaled_mm(qa, qw.t(), sa, sw.t(), out_dtype=torch.float32)
        except (RuntimeError, NotImplementedError):
            t = None
        if t is not None:
            assert ((t.double() - want).norm() / want.norm()).item() <= 1e-5
    qm, sm = fp8kit.quantize(a, scheme="mx")
    assert sm.dtype == getattr(torch, "float8_e8m0fnu", torch.uint8)
    y = fp8kit.dequantize(qm, sm, scheme="mx")
    assert y.dtype == torch.float32 and y.shape == a.shape


def test_raw_path_overhead_cpu(capsys):
    """Host time of one raw fp8kit.scaled_mm call (16x16x32, row scales) on the
    CPU backend, next to the bare C call with the same prepared structs."""
    rng = np.random.default_rng(0)
    qa, sa = fp8kit.quantize(rng.standard_normal((16, 32)).astype(F32), scheme="row")
    qw, sw = fp8kit.quantize(rng.standard_normal((16, 32)).astype(F32), scheme="row")
    b, sbt = qw.T, sw.T
    ctx = fp8kit.Context(fp8kit.Backend.CPU)
    ctx.set_threads(1)
    out = np.empty((16, 16), F32)

    def median_us(f, n=2000, reps=7, clock=time.perf_counter):
        for _ in range(200):
            f()
        ts = []
        for _ in range(reps):
            t0 = clock()
            for _ in range(n):
                f()
            ts.append((clock() - t0) / n * 1e6)
        return sorted(ts)[reps // 2]

    raw = median_us(lambda: fp8kit.scaled_mm(qa, b, sa, sbt, ctx=ctx))
    raw_out = median_us(lambda: fp8kit.scaled_mm(qa, b, sa, sbt, ctx=ctx, out=out))
    from fp8kit import _gemm
    plan = next(p for p in _gemm._plans.values() if p.ctx is ctx)
    args = fp8kit.GemmArgs.from_buffer_copy(plan.raw)
    args.a.data, args.b.data = qa.ctypes.data, qw.ctypes.data
    args.scale_a.data, args.scale_b.data, args.d.data = sa.ctypes.data, sw.ctypes.data, out.ctypes.data
    fn, h, pd, pa = ctx._lib.fp8kit_gemm, ctx.handle, ctypes.byref(plan.desc), ctypes.byref(args)
    assert fn(h, pd, pa, None) == 0
    bare = median_us(lambda: fn(h, pd, pa, None))
    # CPU time of this thread (the 1-thread CPU backend runs here): less disturbed by a busy machine
    raw_cpu = median_us(lambda: fp8kit.scaled_mm(qa, b, sa, sbt, ctx=ctx), clock=time.thread_time)
    bare_cpu = median_us(lambda: fn(h, pd, pa, None), clock=time.thread_time)
    d = fp8kit.scaled_mm(qa, b, sa, sbt, ctx=ctx, out_dtype="float32")
    assert np.array_equal(d, out)
    with capsys.disabled():
        print("\nfp8kit raw scaled_mm 16x16x32 on the CPU backend (1 thread): wall %.1f us per call "
              "(%.1f us with out=), bare C fp8kit_gemm %.1f us -> binding overhead %.1f us; "
              "thread CPU time %.1f us vs bare %.1f us -> overhead %.1f us"
              % (raw, raw_out, bare, raw - bare, raw_cpu, bare_cpu, raw_cpu - bare_cpu))
    ctx.close()
    assert raw < 2000.0  # a loose sanity bound; the figure is printed, not judged here
