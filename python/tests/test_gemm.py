"""test_gemm.py - fp8kit.scaled_mm through the binding on numpy arrays (CPU
backend) against an fp64 reference computed from the dequantized operands,
within docs/spec.md section 3's bounds (fp32 1e-5, bf16 4e-3, fp16 1e-3), for
every scale mode, layouts, epilogue options and fp8 outputs."""
import math

import numpy as np
import pytest

import fp8kit
import spec_ref as ref
from conftest import heavy

F32 = np.float32
BOUND = {"float32": 1e-5, "bfloat16": 4e-3, "float16": 1e-3}
M, N, K = 100, 72, 320  # K not a multiple of 128: a partial K block


def as_f64(d):
    if isinstance(d, fp8kit.TaggedArray) and d.fk_dtype == fp8kit.DType.BF16:
        return ref.bf16_bits_to_f32(np.asarray(d)).astype(np.float64)
    if isinstance(d, fp8kit.TaggedArray):
        return ref.decode(np.asarray(d), d.fk_dtype.name.lower())
    return np.asarray(d).astype(np.float64)


def deq64(q, s, scheme, layout="plain"):
    """fp64 dequantization of a 2-D operand from its codes and plain scales."""
    fmt = q.fk_dtype.name.lower()
    codes = np.asarray(q)
    if scheme == "tensor":
        mult = np.float64(np.asarray(s))
    else:
        mult = ref.dequant_scales_plain(np.asarray(s), scheme, codes.shape, fmt).astype(np.float64)
    return ref.decode(codes, fmt) * mult


def act64(y, act):
    if act is None:
        return y
    if act == "relu":
        return np.maximum(y, 0.0)
    if act == "gelu_tanh":
        return 0.5 * y * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * y ** 3)))
    if act == "gelu":
        return 0.5 * y * (1.0 + np.vectorize(math.erf)(y / math.sqrt(2.0)))
    if act == "silu":
        return y / (1.0 + np.exp(-y))
    raise ValueError(act)


def rel_err(d, want):
    got = as_f64(d)
    assert not np.isnan(got).any(), "NaN in the output"
    if isinstance(d, np.ndarray) and d.dtype == np.float16:
        # heavy-tailed inputs may exceed fp16's range: RNE overflow (|y| >= 65520) must give +-Inf there,
        # and the bound applies to the rest
        over = np.abs(want) >= 65520.0
        assert np.array_equal(np.isinf(got), over), "fp16 Inf where the reference %s" % (
            "fits" if np.isinf(got[~over]).any() else "overflows")
        assert (np.sign(got[over]) == np.sign(want[over])).all()
        got, want = got[~over], want[~over]
    return np.linalg.norm(got - want) / np.linalg.norm(want)


def operands(rng, scheme_a, scheme_b, fmt_a="e4m3", fmt_b="e4m3", kind="normal", n=N):
    gen = (lambda s: heavy(rng, s)) if kind == "heavy" else (lambda s: rng.standard_normal(s).astype(F32))
    a, w = gen((M, K)), gen((n, K))
    qa, sa = fp8kit.quantize(a, scheme=scheme_a, dtype=fmt_a)
    qw, sw = fp8kit.quantize(w, scheme=scheme_b, dtype=fmt_b)
    return qa, sa, qw, sw, deq64(qa, sa, scheme_a) @ deq64(qw, sw, scheme_b).T


CASES = [  # (scheme of A, scheme of B, how scale_b is passed)
    ("tensor", "tensor", lambda s: s),
    ("row", "row", lambda s: s.T),  # torch convention: (1, N)
    ("row", "row", lambda s: s),  # (N, 1) accepted too
    ("row", "tensor", lambda s: s),
    ("tensor", "row", lambda s: s.T),
    ("block1x128", "block128x128", lambda s: s),
    ("block1x128", "block128x128", lambda s: s.T),  # (ceil(K/128), ceil(N/128)) view of the same buffer
    ("mx", "mx", lambda s: s),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16", "float16"])
def test_scale_modes_within_spec_bounds(case, out_dtype, rng):
    sa_scheme, sb_scheme, pass_b = CASES[case]
    for kind, fmts in (("normal", ("e4m3", "e4m3")), ("heavy", ("e4m3", "e5m2"))):
        qa, sa, qw, sw, want = operands(rng, sa_scheme, sb_scheme, *fmts, kind=kind)
        d = fp8kit.scaled_mm(qa, qw.T, sa, pass_b(sw), out_dtype=out_dtype)
        assert d.shape == (M, N)
        assert rel_err(d, want) <= BOUND[out_dtype], (kind, fmts)


def test_default_out_dtype_for_numpy_is_float32(rng):
    qa, sa, qw, sw, want = operands(rng, "row", "row")
    d = fp8kit.scaled_mm(qa, qw.T, sa, sw.T)
    assert d.dtype == F32 and rel_err(d, want) <= 1e-5


def test_no_scales(rng):
    a = (rng.standard_normal((M, K)) * 4).astype(F32)
    w = (rng.standard_normal((N, K)) * 4).astype(F32)
    qa, qw = fp8kit.cast(a, "e4m3"), fp8kit.cast(w, "e4m3")
    d = fp8kit.scaled_mm(qa, qw.T, out_dtype="float32")
    want = ref.decode(np.asarray(qa), "e4m3") @ ref.decode(np.asarray(qw), "e4m3").T
    assert rel_err(d, want) <= 1e-5


@pytest.mark.parametrize("act", [None, "relu", "gelu", "gelu_tanh", "silu"])
def test_epilogue_bias_activation_alpha_beta(act, rng):
    qa, sa, qw, sw, acc = operands(rng, "row", "row")
    bias = rng.standard_normal(N).astype(F32)
    c = ref.f32_to_bf16_bits(rng.standard_normal((M, N)).astype(F32))
    alpha, beta = 0.75, -0.5
    want = act64(alpha * acc + beta * ref.bf16_bits_to_f32(c).astype(np.float64) + bias[None, :], act)
    d = fp8kit.scaled_mm(qa, qw.T, sa, sw.T, bias, "float32", activation=act, alpha=alpha, beta=beta,
                         c=fp8kit.TaggedArray(c, "bf16"))
    assert rel_err(d, want) <= 1e-5
    # bf16 bias, row bias (length M)
    bias_m = ref.f32_to_bf16_bits(rng.standard_normal(M).astype(F32))
    want_m = act64(acc + ref.bf16_bits_to_f32(bias_m).astype(np.float64)[:, None], act)
    d = fp8kit.scaled_mm(qa, qw.T, sa, sw.T, fp8kit.TaggedArray(bias_m, "bf16"), "bfloat16", activation=act,
                         bias_per_row=True)
    assert rel_err(d, want_m) <= 4e-3


def test_swiglu_halves(rng):
    # D (M, N/2) = silu(y[:, :N/2]) * y[:, N/2:] of y = alpha * acc + bias (bias of length N)
    qa, sa, qw, sw, acc = operands(rng, "row", "row")
    bias = rng.standard_normal(N).astype(F32)
    y = 0.75 * acc + bias[None, :]
    h = N // 2
    want = y[:, :h] / (1.0 + np.exp(-y[:, :h])) * y[:, h:]
    d = fp8kit.scaled_mm(qa, qw.T, sa, sw.T, bias, "float32", activation="swiglu", alpha=0.75)
    assert d.shape == (M, h)
    assert rel_err(d, want) <= 1e-5
    with pytest.raises(fp8kit.UnsupportedError):
        fp8kit.scaled_mm(qa, qw.T, sa, sw.T, None, "float32", activation="swiglu", beta=0.5,
                         c=np.zeros((M, N), F32))
    with pytest.raises(fp8kit.InvalidShapeError):
        fp8kit.scaled_mm(qa, qw[:N - 1].T, sa, sw[:N - 1].T, None, "float32", activation="swiglu")


def test_block_scales_mn_major_and_mx_blocked(rng):
    a = rng.standard_normal((M, K)).astype(F32)
    w = rng.standard_normal((N, K)).astype(F32)
    qa, sa = fp8kit.quantize(a, scheme="block1x128")
    qw, sw = fp8kit.quantize(w, scheme="block128x128")
    want = deq64(qa, sa, "block1x128") @ deq64(qw, sw, "block128x128").T
    _, sa_mn = fp8kit.quantize(a, scheme="block1x128", scale_layout="mn_major")  # (ceil(K/128), 4*ceil(M/4))
    d = fp8kit.scaled_mm(qa, qw.T, sa_mn, sw, out_dtype="float32", scale_layout="mn_major")
    assert rel_err(d, want) <= 1e-5
    d = fp8kit.scaled_mm(qa, qw.T, sa_mn[:, :M].T, sw, out_dtype="float32")  # (M, ka) view, inferred
    assert rel_err(d, want) <= 1e-5
    qa, sa = fp8kit.quantize(a, scheme="mx")
    qw, sw = fp8kit.quantize(w, scheme="mx")
    want = deq64(qa, sa, "mx") @ deq64(qw, sw, "mx").T
    _, sab = fp8kit.quantize(a, scheme="mx", scale_layout="blocked")
    _, swb = fp8kit.quantize(w, scheme="mx", scale_layout="blocked")
    assert sab.shape == (128, 12)  # padded: inferred as blocked
    d = fp8kit.scaled_mm(qa, qw.T, sab, swb, out_dtype="float32")
    assert rel_err(d, want) <= 1e-5
    d = fp8kit.scaled_mm(qa, qw.T, sab.reshape(-1), swb.reshape(-1), out_dtype="float32", scale_layout="blocked")
    assert rel_err(d, want) <= 1e-5


def test_block_scales_mn_major_square_grid(rng):
    # M = K / 128: the mn_major buffer (ceil(K/128), 4*ceil(M/4)) and the (M, ka) view have one shape;
    # the packed buffer itself, as quantize returns it, and the strided view both read right
    m, k, n = 8, 1024, 136
    a = rng.standard_normal((m, k)).astype(F32)
    w = rng.standard_normal((n, k)).astype(F32)
    qa, sa = fp8kit.quantize(a, scheme="block1x128")
    qw, sw = fp8kit.quantize(w, scheme="block128x128")
    want = deq64(qa, sa, "block1x128") @ deq64(qw, sw, "block128x128").T
    _, sa_mn = fp8kit.quantize(a, scheme="block1x128", scale_layout="mn_major")
    assert sa_mn.shape == (8, 8)
    d = fp8kit.scaled_mm(qa, qw.T, sa_mn, sw, out_dtype="float32", scale_layout="mn_major")
    assert rel_err(d, want) <= 1e-5
    d = fp8kit.scaled_mm(qa, qw.T, sa_mn.T, sw, out_dtype="float32", scale_layout="mn_major")  # (M, ka) view
    assert rel_err(d, want) <= 1e-5


def test_fp8_output_with_scale_and_amax(rng):
    qa, sa, qw, sw, want = operands(rng, "row", "row")
    scale_d = np.asarray(np.abs(want).max() / 448.0, dtype=F32)
    d, amax = fp8kit.scaled_mm(qa, qw.T, sa, sw.T, out_dtype="e4m3", scale_d=scale_d, return_amax=True)
    assert d.fk_dtype == fp8kit.DType.E4M3 and amax.shape == () and amax.dtype == F32
    assert abs(float(amax) - np.abs(want).max()) <= 1e-5 * np.abs(want).max()
    assert rel_err(ref.decode(np.asarray(d), "e4m3") * float(scale_d), want) <= 0.04
    # the codes are exactly fp8(y / scale_d) of some y within the fp32 bound: re-encoding the reference agrees
    close = ref.encode((want / float(scale_d)).astype(F32), "e4m3")
    assert np.mean(close == np.asarray(d)) > 0.95


@pytest.mark.parametrize("oq", ["mx", "block1x128"])
def test_fused_output_quantization(oq, rng):
    n = 160  # N % 32 == 0 for mx, and a partial 128 block
    qa, sa, qw, sw, want = operands(rng, "row", "row", n=n)
    d, sd = fp8kit.scaled_mm(qa, qw.T, sa, sw.T, out_quant=oq, out_hp="bfloat16")
    assert d.fk_dtype == fp8kit.DType.E4M3
    if oq == "mx":
        assert sd.shape == (M, n // 32) and sd.fk_dtype == fp8kit.DType.E8M0
        deq = fp8kit.dequantize(d, sd, scheme="mx")
    else:
        assert sd.shape == (M, 2) and sd.dtype == F32
        deq = fp8kit.dequantize(d, sd, scheme="block1x128")
    assert rel_err(deq, want) <= 0.07
    # bit-exact docs/spec.md 2 quantization of y rounded to bf16: the reference applied to the library's
    # own bf16 output agrees (same GEMM, so the same y)
    y = fp8kit.scaled_mm(qa, qw.T, sa, sw.T, out_dtype="bfloat16")
    rq, rs = ref.quantize(ref.bf16_bits_to_f32(np.asarray(y)), oq)
    assert np.array_equal(np.asarray(d), rq)
    assert np.array_equal(np.asarray(sd).view(np.uint8), np.asarray(rs).view(np.uint8))


def test_strided_a_and_out(rng):
    qa, sa, qw, sw, want = operands(rng, "row", "row")
    wide = fp8kit.TaggedArray(np.zeros((M, K + 64), np.uint8), "e4m3")
    wide[:, :K] = np.asarray(qa)
    out = np.full((M, N), np.nan, F32)
    d = fp8kit.scaled_mm(wide[:, :K], qw.T, sa, sw.T, out_dtype="float32", out=out)
    assert d is out and rel_err(out, want) <= 1e-5


def test_plan_cache_reuse(rng):
    qa, sa, qw, sw, want = operands(rng, "row", "row")
    ctx = fp8kit.Context(fp8kit.Backend.CPU)
    for _ in range(3):
        d = fp8kit.scaled_mm(qa, qw.T, sa, sw.T, out_dtype="float32", ctx=ctx)
        assert rel_err(d, want) <= 1e-5
    assert ctx.plan_cache_size() == 1
    ctx.close()


def test_python_and_numpy_scalar_scales(rng):
    a = (rng.standard_normal((M, K)) * 4).astype(F32)
    w = (rng.standard_normal((N, K)) * 4).astype(F32)
    qa, qw = fp8kit.cast(a, "e4m3"), fp8kit.cast(w, "e4m3")
    want = 0.5 * 3.0 * (ref.decode(np.asarray(qa), "e4m3") @ ref.decode(np.asarray(qw), "e4m3").T)
    d = fp8kit.scaled_mm(qa, qw.T, np.float32(0.5), 3.0, out_dtype="float32")
    assert rel_err(d, want) <= 1e-5


def test_fp16_output_overflows_to_inf(rng):
    a = np.full((4, 64), 400.0, F32)
    a[1] = -400.0
    a[2:, :] = 0.5
    qa, qw = fp8kit.cast(a, "e4m3"), fp8kit.cast(np.full((8, 64), 448.0, F32), "e4m3")
    d = fp8kit.scaled_mm(qa, qw.T, out_dtype="float16")
    want = ref.decode(np.asarray(qa), "e4m3") @ ref.decode(np.asarray(qw), "e4m3").T
    assert np.isposinf(d[0]).all() and np.isneginf(d[1]).all() and np.isfinite(d[2:]).all()
    assert rel_err(d, want) <= 1e-3


def test_fast_accum_names(rng):
    """fast_accum (fp8kit_gemm_desc's name) and use_fast_accum (torch._scaled_mm's)
    both reach the descriptor; the CPU backend ignores the flag; a contradiction raises."""
    from fp8kit import _gemm
    qa, sa, qw, sw, want = operands(rng, "row", "row")
    ctx = fp8kit.Context(fp8kit.Backend.CPU)
    for kw, flag in ((dict(fast_accum=True), 1), (dict(use_fast_accum=True), 1), (dict(fast_accum=False), 0),
                     (dict(fast_accum=True, use_fast_accum=True), 1)):
        d = fp8kit.scaled_mm(qa, qw.T, sa, sw.T, out_dtype="float32", ctx=ctx, **kw)
        assert rel_err(d, want) <= 1e-5
        plans = [p for k, p in _gemm._plans.items() if p.ctx is ctx and dict(k[-1]).get("ctx") is ctx
                 and all(dict(k[-1]).get(n) == v for n, v in kw.items())]
        assert plans and all(p.desc.fast_accum == flag for p in plans)
    with pytest.raises(fp8kit.InvalidArgumentError, match="disagree"):
        fp8kit.scaled_mm(qa, qw.T, sa, sw.T, ctx=ctx, fast_accum=False, use_fast_accum=True)
    ctx.close()


def test_cached_plan_keeps_every_check(rng):
    """After a call has cached its plan, operands that differ in dtype, shape,
    strides or kind still raise before any C call (they key another plan)."""
    qa, sa, qw, sw, want = operands(rng, "row", "row")
    for _ in range(2):
        assert rel_err(fp8kit.scaled_mm(qa, qw.T, sa, sw.T), want) <= 1e-5
    with pytest.raises(fp8kit.UnsupportedError):  # float32 data where fp8 codes belong
        fp8kit.scaled_mm(fp8kit.to_float32(qa), qw.T, sa, sw.T)
    with pytest.raises(fp8kit.InvalidStrideError):  # b row-major instead of w.t()
        fp8kit.scaled_mm(qa, fp8kit.TaggedArray(np.ascontiguousarray(np.asarray(qw).T), "e4m3"), sa, sw.T)
    with pytest.raises(fp8kit.InvalidShapeError):  # wrong scale length
        fp8kit.scaled_mm(qa, qw.T, sa[:-1], sw.T)
    with pytest.raises(fp8kit.UnsupportedError):  # big-endian float32 scales are not float32 to C
        fp8kit.scaled_mm(qa, qw.T, sa.astype(">f4"), sw.T)
    with pytest.raises(TypeError):
        fp8kit.scaled_mm(qa, qw.T, sa, sw.T, no_such_option=1)
    out = np.empty((M, N), np.float16)
    with pytest.raises(fp8kit.InvalidArgumentError):  # out of the wrong dtype
        fp8kit.scaled_mm(qa, qw.T, sa, sw.T, out=out)
    # readonly operands take the slow pointer route and still give the same result
    ro = [np.array(x) for x in (qa, sa)]
    for x in ro:
        x.setflags(write=False)
    d = fp8kit.scaled_mm(fp8kit.TaggedArray(ro[0], "e4m3"), qw.T, ro[1], sw.T)
    assert rel_err(d, want) <= 1e-5


def test_plans_are_thread_safe(rng):
    """Threads share plans but each writes its own args struct."""
    import threading
    cases = [operands(np.random.default_rng(i), "row", "row") for i in range(4)]
    errors = []

    def work(i):
        qa, sa, qw, sw, want = cases[i]
        for _ in range(200):
            d = fp8kit.scaled_mm(qa, qw.T, sa, sw.T)
            if rel_err(d, want) > 1e-5:
                errors.append(i)
                return

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_closed_context_is_not_used(rng):
    qa, sa, qw, sw, want = operands(rng, "row", "row")
    ctx = fp8kit.Context(fp8kit.Backend.CPU)
    fp8kit.scaled_mm(qa, qw.T, sa, sw.T, ctx=ctx)
    ctx.close()
    with pytest.raises(fp8kit.FP8KitError):  # the cached plan now passes NULL, which C refuses
        fp8kit.scaled_mm(qa, qw.T, sa, sw.T, ctx=ctx)
