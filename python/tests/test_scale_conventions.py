"""test_scale_conventions.py - the scales fp8kit.quantize returns go straight
into fp8kit.scaled_mm for every scale mode (tensor, row, block, mx) and
layout, on square, tall and wide shapes (a square 128-block grid of the
weight, N/128 == K/128, was once refused), passed as quantize returns them
and as torch._scaled_mm's transposed view sw.t(); numpy and, when installed,
torch CPU tensors. Checked against a float64 reference from the dequantized
operands within docs/spec.md 3's bf16 bound (4e-3)."""
import numpy as np
import pytest

import fp8kit
import spec_ref as ref

F32 = np.float32
BF16_BOUND = 4e-3
SHAPES = [(256, 256, 256), (128, 384, 256), (384, 128, 512), (64, 512, 128), (100, 72, 320)]  # (M, N, K)
MODES = {  # mode: (scheme of a, scheme of w)
    "tensor": ("tensor", "tensor"),
    "row": ("row", "row"),
    "block": ("block1x128", "block128x128"),
    "mx": ("mx", "mx"),
}


def deq64(codes, s, scheme, fmt="e4m3"):
    """float64 dequantization of a 2-D operand from its codes and plain scales (numpy bits)."""
    if scheme == "tensor":
        mult = np.float64(s)
    else:
        mult = ref.dequant_scales_plain(np.asarray(s), scheme, codes.shape, fmt).astype(np.float64)
    return ref.decode(codes, fmt) * mult


def rel_err(got, want):
    assert np.isfinite(got).all()
    return np.linalg.norm(got - want) / np.linalg.norm(want)


def _b_scale_forms(mode, sw):
    """The ways a caller may pass w's scales: as quantize returns them, and
    (row, block, mx) as their transposed view (torch._scaled_mm's scale_b = sw.t())."""
    forms = [("as returned", sw)]
    if mode != "tensor":
        forms.append(("transposed view", sw.T if isinstance(sw, np.ndarray) else sw.t()))
    return forms


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "%dx%dx%d" % s)
@pytest.mark.parametrize("mode", list(MODES))
def test_quantize_outputs_feed_scaled_mm_numpy(mode, shape, rng):
    M, N, K = shape
    sa_scheme, sw_scheme = MODES[mode]
    a = rng.standard_normal((M, K)).astype(F32)
    w = rng.standard_normal((N, K)).astype(F32)
    qa, sa = fp8kit.quantize(a, scheme=sa_scheme)
    qw, sw = fp8kit.quantize(w, scheme=sw_scheme)
    want = deq64(np.asarray(qa), sa, sa_scheme) @ deq64(np.asarray(qw), sw, sw_scheme).T
    for how, sb in _b_scale_forms(mode, sw):
        d = fp8kit.scaled_mm(qa, qw.T, sa, sb, out_dtype="bfloat16")
        assert d.shape == (M, N) and d.fk_dtype == fp8kit.DType.BF16
        got = ref.bf16_bits_to_f32(np.asarray(d)).astype(np.float64)
        assert rel_err(got, want) <= BF16_BOUND, how
        # with the mode named, the same scales are read the same way
        d2 = fp8kit.scaled_mm(qa, qw.T, sa, sb, out_dtype="bfloat16", scale_mode=mode)
        assert np.array_equal(np.asarray(d2), np.asarray(d)), how


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "%dx%dx%d" % s)
def test_quantize_layouts_feed_scaled_mm(shape, rng):
    """The other scale layouts quantize writes: block1x128 mn_major for A (the
    buffer itself, recognised by its (ceil(K/128), 4*ceil(M/4)) shape unless
    that equals (M, ceil(K/128)), and its (M, ceil(K/128)) view), and mx
    blocked for both (recognised by size where it differs from plain)."""
    M, N, K = shape
    a = rng.standard_normal((M, K)).astype(F32)
    w = rng.standard_normal((N, K)).astype(F32)
    qa, sa = fp8kit.quantize(a, scheme="block1x128")
    qw, sw = fp8kit.quantize(w, scheme="block128x128")
    want = deq64(np.asarray(qa), sa, "block1x128") @ deq64(np.asarray(qw), sw, "block128x128").T
    _, sa_mn = fp8kit.quantize(a, scheme="block1x128", scale_layout="mn_major")
    ka = -(-K // 128)
    runs = [(sa_mn, {"scale_layout": "mn_major"}), (sa_mn[:, :M].T, {})]
    if sa_mn.shape != (M, ka):
        runs.append((sa_mn, {}))  # inferred from its shape
    for s, kw in runs:
        d = fp8kit.scaled_mm(qa, qw.T, s, sw, out_dtype="float32", **kw)
        assert rel_err(np.asarray(d, np.float64), want) <= 1e-5, (s.shape, kw)
    qa, sa = fp8kit.quantize(a, scheme="mx")
    qw, sw = fp8kit.quantize(w, scheme="mx")
    want = deq64(np.asarray(qa), sa, "mx") @ deq64(np.asarray(qw), sw, "mx").T
    _, sab = fp8kit.quantize(a, scheme="mx", scale_layout="blocked")
    _, swb = fp8kit.quantize(w, scheme="mx", scale_layout="blocked")
    runs = [{"scale_layout": "blocked"}]
    if sab.size != sa.size or swb.size != sw.size:
        runs.append({})  # padded: inferred as blocked
    for kw in runs:
        d = fp8kit.scaled_mm(qa, qw.T, sab, swb, out_dtype="float32", **kw)
        assert rel_err(np.asarray(d, np.float64), want) <= 1e-5, kw


def test_transposed_copy_of_block_scale_b_is_refused(rng):
    """sw.t().contiguous() is another byte order: refused where it can be told
    from sw (a non-square grid), with a message naming the convention."""
    M, N, K = 64, 384, 256
    qa, sa = fp8kit.quantize(rng.standard_normal((M, K)).astype(F32), scheme="block1x128")
    qw, sw = fp8kit.quantize(rng.standard_normal((N, K)).astype(F32), scheme="block128x128")
    with pytest.raises(fp8kit.InvalidStrideError, match="transposed view"):
        fp8kit.scaled_mm(qa, qw.T, sa, np.ascontiguousarray(sw.T))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "%dx%dx%d" % s)
@pytest.mark.parametrize("mode", list(MODES))
def test_quantize_outputs_feed_scaled_mm_torch(mode, shape):
    torch = pytest.importorskip("torch")
    M, N, K = shape
    sa_scheme, sw_scheme = MODES[mode]
    g = torch.Generator().manual_seed(M * 7 + N * 3 + K)
    a = torch.randn(M, K, generator=g)
    w = torch.randn(N, K, generator=g)
    qa, sa = fp8kit.quantize(a, scheme=sa_scheme)
    qw, sw = fp8kit.quantize(w, scheme=sw_scheme)
    assert qa.dtype == torch.float8_e4m3fn

    def bits(t):  # float32 scales as they are; fp8 codes and e8m0 scales as their bytes
        return t.numpy() if t.dtype == torch.float32 else t.view(torch.uint8).numpy()

    want = deq64(bits(qa), bits(sa), sa_scheme) @ deq64(bits(qw), bits(sw), sw_scheme).T
    for how, sb in _b_scale_forms(mode, sw):
        d = fp8kit.scaled_mm(qa, qw.t(), sa, sb, out_dtype=torch.bfloat16)
        assert d.dtype == torch.bfloat16 and tuple(d.shape) == (M, N)
        assert rel_err(d.float().numpy().astype(np.float64), want) <= BF16_BOUND, how
