"""test_quantize.py - fp8kit.quantize / dequantize / cast through the binding
on numpy arrays (CPU backend), bit for bit against spec_ref.py, an independent
numpy implementation of docs/spec.md sections 1-2."""
import itertools
import warnings

import numpy as np
import pytest

import fp8kit
import spec_ref as ref
from conftest import heavy

F32 = np.float32


def bits(a):
    return np.asarray(a).view(np.uint8 if np.asarray(a).dtype.itemsize == 1 else np.uint32)


def same_f32(a, b):
    """Bitwise equality of float32 arrays (NaN == NaN, -0 != +0)."""
    a, b = np.asarray(a, dtype=F32), np.asarray(b, dtype=F32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def nan_canon(a):
    """float32 with every NaN made the same bit pattern (the spec fixes NaN codes, not fp32 NaN payloads)."""
    a = np.array(a, dtype=F32, copy=True)
    a[np.isnan(a)] = np.nan
    return a


# ------------------------------------------------------------------ codecs
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_decode_all_256_codes(fmt):
    codes = fp8kit.TaggedArray(np.arange(256, dtype=np.uint8), fmt)
    got = fp8kit.cast(codes, "float32")
    want = ref.decode(np.arange(256), fmt).astype(F32)
    assert same_f32(nan_canon(got), nan_canon(want))
    finite = ~np.isnan(want)  # the spec fixes NaN codes, not the sign of a decoded NaN
    assert np.array_equal(np.signbit(got)[finite], np.signbit(want)[finite])


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_encode_all_bf16_patterns_and_random_fp32(fmt, rng):
    allbf = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    x = ref.bf16_bits_to_f32(allbf)
    got = fp8kit.cast(x, fmt)
    assert got.fk_dtype == fp8kit.DType[fmt.upper()]
    assert np.array_equal(np.asarray(got), ref.encode(x, fmt))
    # the same values given as bf16 input (widened exactly by the library)
    got_bf = fp8kit.cast(fp8kit.TaggedArray(allbf, "bf16"), fmt)
    assert np.array_equal(np.asarray(got_bf), np.asarray(got))
    r = rng.integers(0, 2 ** 32, size=1_000_000, dtype=np.uint64).astype(np.uint32).view(F32)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.array_equal(np.asarray(fp8kit.cast(r, fmt)), ref.encode(r, fmt))
    # float16 input: every finite and special pattern
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    assert np.array_equal(np.asarray(fp8kit.cast(h, fmt)), ref.encode(h.astype(F32), fmt))


def test_encode_spec_points():
    x = np.array([464, 465, 480, 1e30, np.inf, -np.inf, -0.0, 0.0, 2.0 ** -10, 3 * 2.0 ** -11, np.nan], F32)
    want = [0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0x80, 0x00, 0x00, 0x01, 0x7F]
    assert list(np.asarray(fp8kit.cast(x, "e4m3"))) == want
    assert list(ref.encode(x, "e4m3")) == want
    assert list(np.asarray(fp8kit.cast(np.array([1e9, -np.inf, np.nan], F32), "e5m2"))) == [0x7B, 0xFB, 0x7E]


# -------------------------------------------------------------- schemes
def _inputs(rng, kind, shape):
    if kind == "normal":
        return rng.standard_normal(shape).astype(F32) * F32(3.0)
    if kind == "heavy":
        return heavy(rng, shape)
    x = rng.standard_normal(shape).astype(F32)
    flat = x.reshape(-1)
    n = flat.size
    idx = rng.choice(n, size=min(n, 24), replace=False)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-42, -3e-39, 3e38, 448.0, 480.0,
                         2.0 ** -126, 65504.0], F32)
    flat[idx] = specials[rng.integers(0, specials.size, idx.size)]
    # one all-zero row and one row of tiny values (S underflow to 2^-149 territory)
    if x.ndim >= 2:
        x[..., 0, :] = 0.0
        x[..., -1, :] = F32(1e-44)
    return x


def _check_quant(x, scheme, fmt, axis=-1, pow2=False, rounding="floor", layout="plain", x_in=None):
    q, s = fp8kit.quantize(x if x_in is None else x_in, scheme=scheme, dtype=fmt, axis=axis, pow2=pow2,
                           rounding=rounding, scale_layout=layout)
    rq, rs = ref.quantize(x, scheme, fmt, axis, pow2, rounding, layout)
    assert isinstance(q, fp8kit.TaggedArray) and q.fk_dtype == fp8kit.DType[fmt.upper()]
    assert q.shape == rq.shape, (q.shape, rq.shape)
    mism = np.argwhere(np.asarray(q) != rq)
    assert mism.size == 0, "first q mismatches at %s: got %s want %s" % (
        mism[:5].tolist(), [int(np.asarray(q)[tuple(i)]) for i in mism[:5]], [int(rq[tuple(i)]) for i in mism[:5]])
    assert s.shape == rs.shape, (s.shape, rs.shape)
    if scheme == "mx":
        assert s.fk_dtype == fp8kit.DType.E8M0
        assert np.array_equal(np.asarray(s), rs)
    else:
        assert s.dtype == F32
        assert same_f32(nan_canon(s), nan_canon(rs))
    return q, s


@pytest.mark.parametrize("scheme,fmt,kind", list(itertools.product(
    ["tensor", "row", "block1x128", "block128x128"], ["e4m3", "e5m2"], ["normal", "heavy", "specials"])))
def test_fp32_schemes_vs_reference(scheme, fmt, kind, rng):
    x = _inputs(rng, kind, (130, 300))  # partial 1x128 and 128x128 groups on both edges
    _check_quant(x, scheme, fmt)
    _check_quant(x, scheme, fmt, pow2=True)


@pytest.mark.parametrize("fmt,rounding,kind,axis", list(itertools.product(
    ["e4m3", "e5m2"], ["floor", "rceil"], ["normal", "heavy", "specials"], [-1, -2])))
def test_mx_vs_reference(fmt, rounding, kind, axis, rng):
    x = _inputs(rng, kind, (96, 160))
    _check_quant(x, "mx", fmt, axis=axis, rounding=rounding)


@pytest.mark.parametrize("scheme,layout,axis", [
    ("mx", "blocked", -1), ("mx", "blocked", -2), ("block1x128", "mn_major", -1),
    ("block128x128", "mn_major", -1)])
def test_scale_layouts_vs_reference(scheme, layout, axis, rng):
    x = rng.standard_normal((3, 160, 224)).astype(F32)  # 3 experts, each padded separately
    _check_quant(x, scheme, "e4m3", axis=axis, layout=layout)


@pytest.mark.parametrize("scheme", ["tensor", "row", "block1x128", "block128x128", "mx"])
def test_3d_and_4d_inputs(scheme, rng):
    _check_quant(heavy(rng, (2, 64, 96)), scheme, "e4m3")
    _check_quant(heavy(rng, (2, 3, 32, 64)), scheme, "e5m2")
    if scheme == "tensor":
        _check_quant(heavy(rng, (1000,)), scheme, "e4m3")


def test_bf16_and_f16_inputs_widen_exactly(rng):
    x = heavy(rng, (64, 256))
    xb = ref.f32_to_bf16_bits(x)
    xh = x.astype(np.float16)
    for scheme in ["row", "block1x128", "mx"]:
        _check_quant(ref.bf16_bits_to_f32(xb), scheme, "e4m3", x_in=fp8kit.TaggedArray(xb, "bf16"))
        _check_quant(xh.astype(F32), scheme, "e4m3", x_in=xh)


def test_strided_input_and_out_arrays(rng):
    big = rng.standard_normal((64, 512)).astype(F32)
    x = big[:, 100:356]  # row stride 512, not contiguous
    q, s = fp8kit.quantize(x, scheme="block1x128")
    rq, rs = ref.quantize(np.ascontiguousarray(x), "block1x128")
    assert np.array_equal(np.asarray(q), rq) and same_f32(s, rs)
    qbuf = fp8kit.TaggedArray(np.full((64, 300), 0xAA, np.uint8), "e4m3")
    sbuf = np.full((64, 2), -1.0, F32)
    q2, s2 = fp8kit.quantize(x, scheme="block1x128", out=(qbuf[:, :256], sbuf))
    assert np.array_equal(np.asarray(qbuf)[:, :256], rq) and (np.asarray(qbuf)[:, 256:] == 0xAA).all()
    assert same_f32(sbuf, rs)


# ---------------------------------------------------- docs/spec.md 2.2 edge table
MX_TABLE = [  # value, FLOOR (s, q), RCEIL (s, q) - docs/spec.md section 2.2 (e4m3)
    (0.0, (0, 0x00), (0, 0x00)),
    (2.0 ** -126, (0, 0x40), (0, 0x40)),
    (448.0, (127, 0x7E), (127, 0x7E)),
    (480.0, (127, 0x7E), (128, 0x77)),
    (-480.0, (127, 0xFE), (128, 0xF7)),
    (float(np.finfo(F32).max), (246, 0x7E), (247, 0x78)),
]


@pytest.mark.parametrize("value,floor,rceil", MX_TABLE)
def test_mx_edge_table(value, floor, rceil):
    x = np.full((1, 32), value, F32)
    for rounding, (s_want, q_want) in (("floor", floor), ("rceil", rceil)):
        q, s = fp8kit.quantize(x, scheme="mx", rounding=rounding)
        assert int(np.asarray(s)[0, 0]) == s_want, rounding
        assert (np.asarray(q) == q_want).all(), rounding
        rs, rq = ref.mx_block(x[0], "e4m3", rounding)
        assert rs == s_want and (rq == q_want).all(), "reference disagrees with the spec table"


def test_mx_edge_table_mixed_and_nan():
    x = np.ones((1, 32), F32)
    x[0, 5] = F32(2.0 ** -149)
    for rounding in ("floor", "rceil"):
        q, s = fp8kit.quantize(x, scheme="mx", rounding=rounding)
        assert int(np.asarray(s)[0, 0]) == 119
        qq = np.asarray(q)[0]
        assert qq[5] == 0x00 and (np.delete(qq, 5) == 0x78).all()
    for bad in (np.nan, np.inf, -np.inf):
        y = np.ones((2, 64), F32)
        y[1, 40] = bad
        for rounding in ("floor", "rceil"):
            q, s = fp8kit.quantize(y, scheme="mx", rounding=rounding)
            assert list(np.asarray(s)[1]) == [np.asarray(s)[0, 0], 255]
            assert (np.asarray(q)[1, 32:] == 0x7F).all() and (np.asarray(q)[1, :32] == 0x78).all()


def test_fp32_scheme_special_groups():
    x = np.zeros((4, 8), F32)
    x[0, 3] = -0.0
    x[1] = F32(1e-45)  # amax / 448 underflows: S = 2^-149
    x[2, 2] = np.nan
    x[3, 1] = -np.inf
    q, s = fp8kit.quantize(x, scheme="row")
    s, q = np.asarray(s)[:, 0], np.asarray(q)
    assert s[0] == 1.0 and q[0, 3] == 0x80 and (np.delete(q[0], 3) == 0).all()
    assert s[1] == F32(2.0 ** -149)
    assert np.isnan(s[2]) and np.isnan(s[3]) and (q[2:] == 0x7F).all()


# ----------------------------------------------------------- dequantize
@pytest.mark.parametrize("scheme,axis,layout", [
    ("tensor", -1, "plain"), ("row", -1, "plain"), ("block1x128", -1, "plain"), ("block1x128", -1, "mn_major"),
    ("block128x128", -1, "plain"), ("mx", -1, "plain"), ("mx", -2, "plain"), ("mx", -1, "blocked")])
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_dequantize_round_trip(scheme, axis, layout, fmt, rng):
    x = heavy(rng, (2, 160, 256))
    q, s = fp8kit.quantize(x, scheme=scheme, dtype=fmt, axis=axis, scale_layout=layout)
    y = fp8kit.dequantize(q, s, scheme=scheme, axis=axis, scale_layout=layout)
    assert y.shape == x.shape and y.dtype == F32
    # reference: decode(q) * S in fp32, from the plain-layout reference scales
    _, rs = ref.quantize(x, scheme, fmt, axis)
    want = np.empty_like(x)
    for e in range(x.shape[0]):
        qe = np.asarray(q)[e]
        dec = ref.decode(qe, fmt).astype(F32)
        mult = ref.dequant_scales_plain(rs[e] if scheme != "tensor" else rs, scheme, qe.shape, fmt)
        prod = dec * mult
        want[e] = prod.T if (scheme == "mx" and axis == -2) else prod
    assert same_f32(nan_canon(y), nan_canon(want))
    # and the round trip is within the format's relative step (normals) of x
    step = 2.0 ** -4 if fmt == "e4m3" else 2.0 ** -3
    if scheme == "mx":  # FLOOR scales may saturate the block's largest values by up to 1 - 448/512
        step = 0.125
    big = np.abs(x) > np.abs(x).max() * 2.0 ** -6
    assert (np.abs(y[big] - x[big]) <= step * np.abs(x[big]) + 1e-30).all()
    for out_dtype in ("bfloat16", "float16"):
        y2 = fp8kit.dequantize(q, s, scheme=scheme, axis=axis, scale_layout=layout, out_dtype=out_dtype)
        if out_dtype == "bfloat16":
            assert y2.fk_dtype == fp8kit.DType.BF16
            assert np.array_equal(np.asarray(y2), ref.f32_to_bf16_bits(want))
        else:
            assert y2.dtype == np.float16
            with np.errstate(over="ignore"):
                assert np.array_equal(y2.view(np.uint16), want.astype(np.float16).view(np.uint16))


def test_untagged_uint8_needs_dtype(rng):
    x = rng.standard_normal((4, 64)).astype(F32)
    q, s = fp8kit.quantize(x, scheme="row", dtype="e5m2")
    raw = np.asarray(q)  # plain uint8
    y = fp8kit.dequantize(raw, s, scheme="row", dtype="e5m2")
    assert same_f32(y, fp8kit.dequantize(q, s, scheme="row"))
    with pytest.raises(fp8kit.InvalidArgumentError):
        fp8kit.dequantize(q, s, scheme="row", dtype="e4m3")  # tag says e5m2
    with pytest.raises(fp8kit.UnsupportedError, match="untagged uint8"):
        fp8kit.cast(raw, "float32")


def test_to_float32_helper(rng):
    x = heavy(rng, (8, 64))
    q, s = fp8kit.quantize(x, scheme="mx")
    assert same_f32(nan_canon(fp8kit.to_float32(q)), nan_canon(ref.decode(np.asarray(q), "e4m3").astype(F32)))
    sc = fp8kit.to_float32(s)
    want = np.where(np.asarray(s) == 255, np.nan, np.ldexp(1.0, np.asarray(s).astype(int) - 127))
    assert same_f32(nan_canon(sc), nan_canon(want.astype(F32)))


# ---------------------------------------------------------- shape rules
@pytest.mark.parametrize("shape", [(5,), (7, 64), (130, 300), (3, 129, 256), (2, 2, 64, 96)])
def test_quant_shapes_python_matches_c(shape):
    from fp8kit import _quant
    combos = [("tensor", -1, "plain"), ("row", -1, "plain"), ("block1x128", -1, "plain"),
              ("block1x128", -1, "mn_major"), ("block128x128", -1, "plain"), ("block128x128", -1, "mn_major"),
              ("mx", -1, "plain"), ("mx", -1, "blocked"), ("mx", -2, "plain"), ("mx", -2, "blocked")]
    for scheme, axis, layout in combos:
        d = _quant.make_quant_desc(scheme, "e4m3", axis, "floor", False, layout)
        try:
            c = _quant.c_quant_shapes(shape, d)
        except fp8kit.FP8KitError as e:
            with pytest.raises(type(e)):
                _quant.quant_shapes(shape, d)
            continue
        assert _quant.quant_shapes(shape, d) == c, (scheme, axis, layout)


def test_tagged_array_views_and_pickle(rng):
    import pickle
    q, _ = fp8kit.quantize(rng.standard_normal((8, 64)).astype(F32), scheme="row", dtype="e5m2")
    assert q.T.fk_dtype == q[2:, 3:].fk_dtype == fp8kit.DType.E5M2
    assert (q == q).fk_dtype is None  # a bool result is not fp8 codes
    p = pickle.loads(pickle.dumps(q))
    assert isinstance(p, fp8kit.TaggedArray) and p.fk_dtype == fp8kit.DType.E5M2 and np.array_equal(p, q)
    with pytest.raises(fp8kit.InvalidArgumentError, match="stores uint8"):
        fp8kit.TaggedArray(np.zeros(4, np.float32), "e4m3")
