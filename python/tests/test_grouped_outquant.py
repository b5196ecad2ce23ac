"""test_grouped_outquant.py - fp8kit.grouped_mm's fused output stage
(fp8kit_grouped_gemm with desc.out_quant; scale_d / out_quant / out_hp /
out_rounding / out_pow2 / return_amax as scaled_mm takes them) on the CPU
backend: 'mx' and 'block1x128' return (d, scales) whose codes and scales are,
bit for bit, fp8kit.quantize's of each group's rows of the same call's
unquantized output rounded to out_hp; 'scaled' (scale_d) gives
fp8(fl32(y / scale_d)) and, with return_amax, max |y| over the rows the groups
own (0 when none does). Contiguous and masked layouts, plain and swiglu, empty
groups, rows no group owns left unwritten (out=), the options (out_hp f16 /
f32, rceil, pow2, e5m2), bad input (the scaled_mm checks and messages), the
probes (describe, workspace size), torch CPU tensors, and the torch ops
(torch_ops.grouped_mm / torch.ops.fp8kit.grouped_mm_quant: values, the fake
kernel's shapes, opcheck, torch.compile)."""
import numpy as np
import pytest

import fp8kit
import spec_ref as ref
from conftest import heavy
from test_grouped import quant_experts, tag

F32 = np.float32
T, K, G = 150, 96, 5
M = T // G  # masked: G slabs of M rows
OFFS = np.array([20, 20, 75, 140, 144], dtype=np.int32)  # group 1 empty, rows 144.. owned by none
COUNTS = np.array([0, M, 7, 13, 1], dtype=np.int32)  # masked: empty, full and partial experts
ND = {"mx": 96, "block1x128": 160}  # D's columns: 3 mx blocks; a partial 128 block
SCHEME = {"mx": "mx", "block1x128": "block1x128"}  # fp8kit.quantize's scheme of each out_quant
SENTINEL = 0x5A  # an e4m3 code (a finite value) for rows that must stay unwritten


def operands(rng, n, masked=False):
    """a (T, K) (masked: (G, M, K)) quantized by row, heavy-tailed; the (G, N, K) stack quantized per
    expert by row (scales (G, N)); a (G, N) bias. Returns (a, b, scale_a, scale_b, bias) as grouped_mm
    takes them."""
    x = heavy(rng, (T, K))
    qa, sa = fp8kit.quantize(x, scheme="row")
    w = rng.standard_normal((G, n, K)).astype(F32)
    qw, sw, _ = quant_experts(w, "row")
    bias = rng.standard_normal((G, n)).astype(F32)
    a, sa = tag(np.asarray(qa)), np.asarray(sa)
    if masked:
        a, sa = tag(np.asarray(qa).reshape(G, M, K)), sa.reshape(G, M, 1)
    return a, np.swapaxes(qw, 1, 2), sa, sw, bias


def spans(layout):
    """(group, first row, end row) of each group over D's T rows (masked: the G x M rows flattened)."""
    if layout == "masked":
        return [(g, g * M, g * M + int(c)) for g, c in enumerate(COUNTS)]
    out, prev = [], 0
    for g, end in enumerate(OFFS):
        out.append((g, prev, int(end)))
        prev = int(end)
    return out


def offs_of(layout):
    return COUNTS if layout == "masked" else OFFS


def rows2d(x, cols=None):
    """D or its scales as (T, cols): the masked (G, M, cols) flattened."""
    arr = np.asarray(x)
    return arr.reshape(T, arr.shape[-1] if cols is None else cols)


def round_hp(y, out_hp):
    """f32 y rounded to out_hp (RNE) as the array fp8kit.quantize reads: float32, float16, or bf16 (a tagged
    uint16 array)."""
    if out_hp == "float32":
        return np.ascontiguousarray(y, dtype=F32)
    if out_hp == "float16":  # (heavy-tailed rows may overflow f16 to Inf: so does the library's rounding)
        with np.errstate(over="ignore"):
            return np.ascontiguousarray(y, dtype=F32).astype(np.float16)
    return tag(ref.f32_to_bf16_bits(y), fp8kit.DType.BF16)


def same_bits(x, y):
    x, y = np.ascontiguousarray(np.asarray(x)), np.ascontiguousarray(np.asarray(y))
    return x.shape == y.shape and x.dtype.itemsize == y.dtype.itemsize and x.tobytes() == y.tobytes()


def check_against_quantize(d, sd, y32, layout, oq, out_hp="bfloat16", rounding="floor", pow2=False,
                           fmt="e4m3", nd=None):
    """Every owned row of the fused (d, sd) equals fp8kit.quantize of the same rows of y32 (the call's f32
    output) rounded to out_hp, group by group: codes and scales bit for bit."""
    nd = nd or ND[oq]
    cols = nd // 32 if oq == "mx" else -(-nd // 128)
    D, S, Y = rows2d(d), rows2d(sd, cols), rows2d(y32)
    checked = 0
    for g, r0, r1 in spans(layout):
        if r1 == r0:
            continue
        q, s = fp8kit.quantize(round_hp(Y[r0:r1], out_hp), scheme=SCHEME[oq], dtype=fmt, rounding=rounding,
                               pow2=pow2)
        assert same_bits(D[r0:r1], q), (g, "codes")
        assert same_bits(S[r0:r1], s), (g, "scales")
        checked += r1 - r0
    assert checked > 0


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
@pytest.mark.parametrize("act", [None, "swiglu"])
@pytest.mark.parametrize("oq", ["mx", "block1x128"])
def test_equals_quantize_of_the_output(oq, act, layout, rng):
    """(d, scales) = fp8kit.quantize of each group's rows of the f32 output rounded to bf16, bit for bit;
    shapes and dtypes of both; empty groups; the bf16 output of the same call is that rounding."""
    nd = ND[oq]
    n = 2 * nd if act == "swiglu" else nd
    a, b, sa, sb, bias = operands(rng, n, layout == "masked")
    offs = offs_of(layout)
    kw = dict(bias=bias, activation=act or "gelu_tanh", alpha=0.75, layout=layout)
    d, sd = fp8kit.grouped_mm(a, b, offs, sa, sb, out_quant=oq, **kw)
    lead = (G, M) if layout == "masked" else (T,)
    cols = nd // 32 if oq == "mx" else -(-nd // 128)
    assert d.shape == lead + (nd,) and d.fk_dtype == fp8kit.DType.E4M3
    assert np.shape(sd) == lead + (cols,)
    if oq == "mx":
        assert sd.fk_dtype == fp8kit.DType.E8M0
    else:
        assert np.asarray(sd).dtype == F32
    y32 = fp8kit.grouped_mm(a, b, offs, sa, sb, out_dtype="float32", **kw)
    ybf = fp8kit.grouped_mm(a, b, offs, sa, sb, out_dtype="bfloat16", **kw)
    for g, r0, r1 in spans(layout):  # the library's own bf16 output is the RNE rounding of its f32 one
        assert same_bits(rows2d(ybf)[r0:r1], ref.f32_to_bf16_bits(rows2d(y32)[r0:r1])), g
    check_against_quantize(d, sd, y32, layout, oq)


@pytest.mark.parametrize("case", [
    ("mx", "float16", "rceil", False, "e4m3"),
    ("mx", "float32", "floor", False, "e5m2"),
    ("block1x128", "float16", "floor", True, "e4m3"),
    ("block1x128", "float32", "floor", False, "e5m2"),
    ("block1x128", "bfloat16", "floor", True, "e5m2"),
])
@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_options(case, layout, rng):
    """out_hp (f16, f32), out_rounding 'rceil', out_pow2 and an e5m2 D reach the library: still quantize's
    bits of the rounded output (swiglu)."""
    oq, out_hp, rounding, pow2, fmt = case
    nd = ND[oq]
    a, b, sa, sb, bias = operands(rng, 2 * nd, layout == "masked")
    offs = offs_of(layout)
    kw = dict(bias=bias, activation="swiglu", layout=layout)
    d, sd = fp8kit.grouped_mm(a, b, offs, sa, sb, out_dtype=fmt, out_quant=oq, out_hp=out_hp, out_rounding=rounding,
                              out_pow2=pow2, **kw)
    assert d.fk_dtype == fp8kit.dtype_of_name(fmt)
    y32 = fp8kit.grouped_mm(a, b, offs, sa, sb, out_dtype="float32", **kw)
    check_against_quantize(d, sd, y32, layout, oq, out_hp, rounding, pow2, fmt)


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
@pytest.mark.parametrize("act", [None, "swiglu"])
def test_scaled_codes_and_amax(act, layout, rng):
    """scale_d (out_quant 'scaled' implied): D = fp8(fl32(y / scale_d)) bit for bit over the owned rows;
    return_amax gives max |y| over them (a float32 scalar); without return_amax only d; rows no group owns
    stay (out=)."""
    n = 80 if act == "swiglu" else 40
    nd = n // 2 if act == "swiglu" else n
    a, b, sa, sb, bias = operands(rng, n, layout == "masked")
    offs = offs_of(layout)
    kw = dict(bias=bias, activation=act, alpha=1.5, layout=layout)
    scale_d = np.array(0.37, dtype=F32)  # not a power of two: the division rounds
    lead = (G, M) if layout == "masked" else (T,)
    out = tag(np.full(lead + (nd,), SENTINEL, dtype=np.uint8))
    d, amax = fp8kit.grouped_mm(a, b, offs, sa, sb, scale_d=scale_d, return_amax=True, out=out, **kw)
    assert d is out and d.fk_dtype == fp8kit.DType.E4M3
    assert np.shape(amax) == () and np.asarray(amax).dtype == F32
    y32 = rows2d(fp8kit.grouped_mm(a, b, offs, sa, sb, out_dtype="float32", **kw))
    D = rows2d(d)
    owned = np.zeros(T, dtype=bool)
    for g, r0, r1 in spans(layout):
        if r1 == r0:
            continue
        owned[r0:r1] = True
        want = fp8kit.cast(y32[r0:r1] / scale_d, "e4m3")  # numpy's f32 division: fl32(y / scale_d)
        assert same_bits(D[r0:r1], want), g
    assert (D[~owned] == SENTINEL).all()
    assert float(amax) == float(np.abs(y32[owned]).max())
    # out_quant='scaled' spelled out, no return_amax: d alone, the same codes
    d2 = fp8kit.grouped_mm(a, b, offs, sa, sb, scale_d=scale_d, out_quant="scaled", **kw)
    assert not isinstance(d2, tuple) and same_bits(rows2d(d2)[owned], D[owned])


def test_scaled_all_groups_empty_gives_zero_amax(rng):
    a, b, sa, sb, _ = operands(rng, 40)
    out = tag(np.full((T, 40), SENTINEL, dtype=np.uint8))
    d, amax = fp8kit.grouped_mm(a, b, np.zeros(G, np.int32), sa, sb, scale_d=np.array(1.0, F32),
                                return_amax=True, out=out)
    assert float(amax) == 0.0 and (np.asarray(out) == SENTINEL).all()


@pytest.mark.parametrize("oq", ["mx", "block1x128"])
def test_out_keeps_unowned_rows(oq, rng):
    """out= (an fp8 D) is written in place: the rows no group owns keep their contents."""
    nd = ND[oq]
    a, b, sa, sb, _ = operands(rng, nd)
    out = tag(np.full((T, nd), SENTINEL, dtype=np.uint8))
    d, sd = fp8kit.grouped_mm(a, b, OFFS, sa, sb, out_quant=oq, out=out)
    assert d is out
    assert (np.asarray(out)[OFFS[-1]:] == SENTINEL).all()
    y32 = fp8kit.grouped_mm(a, b, OFFS, sa, sb, out_dtype="float32")
    check_against_quantize(d, sd, y32, "contiguous", oq)


def test_block_output_feeds_the_down_projection(rng):
    """The swiglu + block1x128 output of a masked call is the a / scale_a of the next masked call with block
    scales, as they come (D (G, M, N/2), scales (G, M, ceil(N/2/128)))."""
    nd = ND["block1x128"]
    a, b, sa, sb, _ = operands(rng, 2 * nd, masked=True)
    h, sh = fp8kit.grouped_mm(a, b, COUNTS, sa, sb, activation="swiglu", out_quant="block1x128", layout="masked")
    w2 = rng.standard_normal((G, 48, nd)).astype(F32)
    qw2, sw2 = fp8kit.quantize(w2, scheme="128x128")
    y = fp8kit.grouped_mm(h, np.swapaxes(qw2, 1, 2), COUNTS, sh, sw2, out_dtype="float32", layout="masked")
    assert np.shape(y) == (G, M, 48)
    y_ref = fp8kit.grouped_mm(tag(np.ascontiguousarray(np.asarray(h)[2])), np.swapaxes(qw2, 1, 2)[2:3],
                              COUNTS[2:3], np.ascontiguousarray(np.asarray(sh)[2]), sw2[2:3], out_dtype="float32")
    c = int(COUNTS[2])
    assert same_bits(np.asarray(y)[2, :c], np.asarray(y_ref)[:c])


def test_bad_input(rng):
    """The scaled_mm checks, with fp8kit.grouped_mm's name."""
    a, b, sa, sb, _ = operands(rng, 40)
    a2, b2, sa2, sb2, _ = operands(rng, 80)
    sd = np.array(1.0, dtype=F32)
    with pytest.raises(fp8kit.InvalidShapeError, match=r"out_quant 'mx' needs N % 32 == 0 \(N = 40\)"):
        fp8kit.grouped_mm(a, b, OFFS, sa, sb, out_quant="mx")
    with pytest.raises(fp8kit.InvalidShapeError, match=r"N/2 % 32 == 0 \(N/2 = 40\)"):
        fp8kit.grouped_mm(a2, b2, OFFS, sa2, sb2, out_quant="mx", activation="swiglu")
    with pytest.raises(fp8kit.UnsupportedError, match="needs an e4m3/e5m2 out_dtype"):
        fp8kit.grouped_mm(a, b, OFFS, sa, sb, out_quant="block1x128", out_dtype="float32")
    with pytest.raises(fp8kit.UnsupportedError, match="needs output quantization"):
        fp8kit.grouped_mm(a, b, OFFS, sa, sb, out_dtype="e4m3")
    with pytest.raises(fp8kit.InvalidArgumentError, match="'scaled' needs scale_d"):
        fp8kit.grouped_mm(a, b, OFFS, sa, sb, out_quant="scaled", out_dtype="e4m3")
    with pytest.raises(fp8kit.UnsupportedError, match=r"output quantization \(scaled\) needs an e4m3/e5m2"):
        fp8kit.grouped_mm(a, b, OFFS, sa, sb, out_quant="scaled")  # as scaled_mm: no scale_d, no fp8 default
    with pytest.raises(fp8kit.InvalidArgumentError, match="scale_d must be a float32 scalar"):
        fp8kit.grouped_mm(a, b, OFFS, sa, sb, scale_d=np.ones(2, F32))
    with pytest.raises(fp8kit.InvalidArgumentError, match="scale_d must be a float32 scalar"):
        fp8kit.grouped_mm(a, b, OFFS, sa, sb, scale_d=np.array(1.0, np.float16))
    with pytest.raises(fp8kit.InvalidArgumentError, match="scale_d is an input only"):
        fp8kit.grouped_mm(a, b, OFFS, sa, sb, scale_d=sd, out_quant="block1x128")
    with pytest.raises(fp8kit.UnsupportedError, match="return_amax needs"):
        fp8kit.grouped_mm(a, b, OFFS, sa, sb, return_amax=True)
    with pytest.raises(fp8kit.UnsupportedError, match="return_amax needs"):
        fp8kit.grouped_mm(a, b, OFFS, sa, sb, out_quant="block1x128", return_amax=True)
    with pytest.raises(fp8kit.UnsupportedError, match="out_hp must be"):
        fp8kit.grouped_mm(a, b, OFFS, sa, sb, out_quant="block1x128", out_hp="e4m3")
    with pytest.raises(fp8kit.InvalidArgumentError, match="out_quant"):
        fp8kit.grouped_mm(a, b, OFFS, sa, sb, out_quant="bogus")
    with pytest.raises(fp8kit.InvalidArgumentError, match="out_rounding"):
        fp8kit.grouped_mm(a, b, OFFS, sa, sb, out_quant="block1x128", out_rounding="bogus")
    with pytest.raises(fp8kit.InvalidArgumentError, match="out has dtype f32; expected e4m3"):
        fp8kit.grouped_mm(a, b, OFFS, sa, sb, out_quant="block1x128", out=np.zeros((T, 40), F32))
    # scale_d inside out: refused before the call, out unchanged
    buf = np.full(T * 40, SENTINEL, dtype=np.uint8)
    out = tag(buf.reshape(T, 40))
    with pytest.raises(fp8kit.InvalidArgumentError, match="scale_d"):
        fp8kit.grouped_mm(a, b, OFFS, sa, sb, scale_d=buf[:4].view(F32).reshape(()), out=out)
    assert (buf == SENTINEL).all()


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_describe_and_workspace_take_the_keywords(layout, rng):
    a, b, sa, sb, _ = operands(rng, 2 * ND["mx"], layout == "masked")
    kw = dict(activation="swiglu", layout=layout)
    for q in (dict(out_quant="mx"), dict(out_quant="block1x128", out_pow2=True), dict(scale_d=np.array(2.0, F32)),
              dict(scale_d=np.array(2.0, F32), return_amax=True)):
        assert fp8kit.grouped_mm_describe(a, b, sa, sb, **kw, **q) == "cpu: one gemm per group"
        assert fp8kit._grouped.grouped_mm_workspace_size(a, b, sa, sb, **kw, **q) == 0
    a, b, sa, sb, _ = operands(rng, 40, layout == "masked")  # N = 40: no mx output
    with pytest.raises(fp8kit.InvalidShapeError, match="N % 32"):
        fp8kit.grouped_mm_describe(a, b, sa, sb, out_quant="mx", layout=layout)
    with pytest.raises(fp8kit.InvalidShapeError, match="N % 32"):
        fp8kit._grouped.grouped_mm_workspace_size(a, b, sa, sb, out_quant="mx", layout=layout)


# ------------------------------------------------------------------ torch
def to_torch(torch, a, b, sa, sb, bias, offs):
    ta = torch.from_numpy(np.asarray(a)).view(torch.float8_e4m3fn)
    tw = torch.from_numpy(np.ascontiguousarray(np.swapaxes(np.asarray(b), 1, 2))).view(torch.float8_e4m3fn)
    return (ta, tw.transpose(1, 2), torch.from_numpy(offs), torch.from_numpy(np.ascontiguousarray(sa)),
            torch.from_numpy(np.ascontiguousarray(sb)), torch.from_numpy(bias))


def tbytes(t):
    """A torch tensor's bytes as numpy (fp8 / e8m0 through uint8)."""
    import torch
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) or t.dtype == getattr(torch, "float8_e8m0fnu", None):
        t = t.view(torch.uint8)
    return t.numpy()


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
@pytest.mark.parametrize("oq", ["mx", "block1x128", "scaled"])
def test_torch_cpu_and_ops_match_numpy(oq, layout, rng):
    """torch CPU tensors through fp8kit.grouped_mm and fp8kit.torch_ops.grouped_mm (the op
    torch.ops.fp8kit.grouped_mm_quant): the numpy call's bits, the same return convention, e8m0 scales as
    torch.float8_e8m0fnu."""
    torch = pytest.importorskip("torch")
    from fp8kit import torch_ops
    nd = ND.get(oq, 64)
    a, b, sa, sb, bias = operands(rng, 2 * nd, layout == "masked")
    offs = offs_of(layout)
    q = dict(scale_d=np.array(0.5, F32), return_amax=True) if oq == "scaled" else dict(out_quant=oq)
    want = fp8kit.grouped_mm(a, b, offs, sa, sb, bias=bias, activation="swiglu", layout=layout, **q)
    ta, tb, toffs, tsa, tsb, tbias = to_torch(torch, a, b, sa, sb, bias, offs)
    tq = dict(q, scale_d=torch.tensor(0.5)) if oq == "scaled" else q
    kw = dict(bias=tbias, activation="swiglu", layout=layout)
    for got in (fp8kit.grouped_mm(ta, tb, toffs, tsa, tsb, **kw, **tq),
                torch_ops.grouped_mm(ta, tb, toffs, tsa, tsb, **kw, **tq)):
        assert isinstance(got, tuple) and len(got) == 2
        assert got[0].dtype == torch.float8_e4m3fn
        if oq == "mx":
            assert got[1].dtype == torch.float8_e8m0fnu
        owned = np.zeros(T, dtype=bool)
        for g, r0, r1 in spans(layout):
            owned[r0:r1] = True
        assert same_bits(rows2d(tbytes(got[0]))[owned], rows2d(want[0])[owned])
        if oq == "scaled":
            assert got[1].shape == () and float(got[1]) == float(want[1])
        else:
            assert same_bits(rows2d(tbytes(got[1]))[owned], rows2d(want[1])[owned])
    if oq == "scaled":  # no return_amax: d alone, through both
        for fn in (fp8kit.grouped_mm, torch_ops.grouped_mm):
            d = fn(ta, tb, toffs, tsa, tsb, scale_d=torch.tensor(0.5), **kw)
            assert isinstance(d, torch.Tensor) and d.dtype == torch.float8_e4m3fn
    with pytest.raises(fp8kit.UnsupportedError, match="return_amax needs"):
        torch_ops.grouped_mm(ta, tb, toffs, tsa, tsb, out_quant="mx", return_amax=True, **kw)
    # out_quant 'none' (or the OutQuant member) is the plain op: D in out_dtype alone
    for none in ("none", fp8kit.OutQuant.NONE):
        d = torch_ops.grouped_mm(ta, tb, toffs, tsa, tsb, out_quant=none, out_dtype=torch.float32, **kw)
        assert isinstance(d, torch.Tensor) and d.dtype == torch.float32


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
@pytest.mark.parametrize("act", ["", "swiglu"])
@pytest.mark.parametrize("oq", ["mx", "block1x128", "scaled"])
def test_fake_kernel_shapes(oq, act, layout, rng):
    """torch.ops.fp8kit.grouped_mm_quant's fake kernel gives the real outputs' shapes and dtypes (D's N/2
    columns and the scales' Nd/32 or ceil(Nd/128) with swiglu; masked (G, M, ...)); opcheck's fake-tensor
    test with every row owned."""
    torch = pytest.importorskip("torch")
    from fp8kit import torch_ops  # noqa: F401 (registers the ops)
    from torch._subclasses.fake_tensor import FakeTensorMode
    nd = ND.get(oq, 64)
    n = 2 * nd if act else nd
    a, b, sa, sb, bias = operands(rng, n, layout == "masked")
    full = np.full(G, M, np.int32) if layout == "masked" else np.array([30, 60, 90, 120, T], np.int32)
    ta, tb, toffs, tsa, tsb, tbias = to_torch(torch, a, b, sa, sb, bias, full)
    args = (ta, tb, toffs, tsa, tsb, tbias, "float8_e5m2" if oq == "block1x128" else "", act, 1.0, layout, "",
            "" if oq == "scaled" else oq, torch.tensor(2.0) if oq == "scaled" else None, "", "", False)
    real = torch.ops.fp8kit.grouped_mm_quant(*args)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = torch.ops.fp8kit.grouped_mm_quant(*(mode.from_tensor(x) if isinstance(x, torch.Tensor) else x
                                                   for x in args))
    for f, r in zip(fake, real):
        assert (f.shape, f.dtype, f.device) == (r.shape, r.dtype, r.device)
    lead = (G, M) if layout == "masked" else (T,)
    assert real[0].shape == lead + (nd,)
    assert real[1].shape == {"mx": lead + (nd // 32,), "block1x128": lead + (-(-nd // 128),), "scaled": ()}[oq]
    torch.library.opcheck(torch.ops.fp8kit.grouped_mm_quant, args, test_utils=("test_faketensor",))


def test_op_without_output_quantization_is_refused(rng):
    torch = pytest.importorskip("torch")
    from fp8kit import torch_ops  # noqa: F401
    a, b, sa, sb, bias = operands(rng, 64)
    ta, tb, toffs, tsa, tsb, _ = to_torch(torch, a, b, sa, sb, bias, OFFS)
    with pytest.raises(fp8kit.InvalidArgumentError, match="needs output quantization"):
        torch.ops.fp8kit.grouped_mm_quant(ta, tb, toffs, tsa, tsb, None, "", "", 1.0, "contiguous", "", "", None, "",
                                          "", False)
    with pytest.raises(fp8kit.InvalidArgumentError, match="scale_d is an input only"):
        torch.ops.fp8kit.grouped_mm_quant(ta, tb, toffs, tsa, tsb, None, "", "", 1.0, "contiguous", "", "none",
                                          torch.tensor(1.0), "", "", False)


def test_torch_compile_swiglu_block_masked(rng):
    """torch.compile traces torch_ops.grouped_mm with out_quant through the fake kernel (aot_eager)."""
    torch = pytest.importorskip("torch")
    from fp8kit import torch_ops
    nd = ND["block1x128"]
    a, b, sa, sb, bias = operands(rng, 2 * nd, masked=True)
    ta, tb, _, tsa, tsb, _ = to_torch(torch, a, b, sa, sb, bias, COUNTS)
    full = torch.full((G,), M, dtype=torch.int32)

    def layer(x, s):
        h, sh = torch_ops.grouped_mm(x, tb, full, s, tsb, activation="swiglu", layout="masked",
                                     out_quant="block1x128")
        return h.view(torch.uint8), sh * 2

    eager = layer(ta, tsa)
    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)(ta, tsa)
    assert compiled[0].shape == (G, M, nd) and compiled[1].shape == (G, M, 2)
    assert torch.equal(eager[0], compiled[0]) and torch.equal(eager[1], compiled[1])
